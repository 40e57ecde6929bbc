/*
 * http/'s face for the process shell (process/start.c, children.c): start
 * the server, and the two things a fork and a privilege drop need. The
 * shell decides the policy (a second address when the first is taken, the
 * announcement in the run directory, whether to write the port file) and
 * passes it in; the server never calls back up except through these
 * pointers.
 */
#ifndef PPROF_HTTP_SERVER_H
#define PPROF_HTTP_SERVER_H

#include <stdint.h>

#include <stddef.h>

struct server_listen {
    /* Where to listen, civetweb's syntax ("host:port" or "port"), in a
     * buffer of addr_size bytes. */
    char *addr;
    size_t addr_size;
    /* Called when addr cannot be bound: may rewrite addr (port 0 on the
     * same host) and return 1 for one more try. NULL: no second try. */
    int (*fallback)(char *addr, size_t addr_size);
    /* Called once the server listens, with its port. NULL: nothing. */
    void (*on_listening)(int port);
    /* 1: a forked worker, whose parent says where the family serves: its
     * own "serving" line is debug. */
    int quiet;
};

/* Starts the server as how says. On failure logs one line and returns
 * -errno; the host goes on. Not async-signal-safe. */
int server_start(const struct server_listen *how);
/* Creates PPROF_PORT_FILE (empty) now, while the process may: it is filled
 * by server_write_port_file(). Not async-signal-safe. */
void server_reserve_port_file(void);
/* Writes "host:port" to PPROF_PORT_FILE (when set). Not async-signal-safe. */
void server_write_port_file(int port);

/* In a new image of a process that loaded the agent before its exec (a
 * wrapper that execs the real program): removes PPROF_PORT_FILE when the
 * earlier image wrote it, since the server it names ended with the exec;
 * this image writes it again once its own server listens. lived_ns: how
 * long the process has lived (rundir_env_own). Called by the constructor;
 * a few system calls, only with PPROF_PORT_FILE set. Not
 * async-signal-safe. */
void server_port_file_after_exec(int64_t lived_ns);
/* Where this process serves, "host:port" (host as configured, 0.0.0.0 for
 * a bare port), or "" before the server listens. Not async-signal-safe. */
void server_address(char *out, size_t size);

/* Text the serving line carries after the pid ("handed down by timeout
 * pid 12"); copied. Before server_start. Not async-signal-safe. */
void server_role_note(const char *text);
/* Stops the server (an attached agent's detach, process/attach.c): the
 * port closes once the requests in flight ended (civetweb joins its
 * threads); server_start() may start it again. Not async-signal-safe. */
void server_stop(void);
/* In a fork child (the only thread): forgets the parent's server, so that
 * server_start() can start the child's own. Async-signal-safe. */
void server_fork_child(void);

#endif
