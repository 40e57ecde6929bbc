/*
 * Operations: what an operator needs around the endpoints.
 *
 * - The run directory (rundir.c): one small file per serving process
 *   ("pid ppid program address"), so that every worker of a multi-process
 *   service can be found, and the index page can link to all of them.
 * - Children (children.c): the fork policy. A child forked without exec
 *   (nginx and PostgreSQL workers, prefork servers) gets a server of its
 *   own on port 0, started a moment after the fork by a small agent thread,
 *   and announces it in the run directory.
 * - Dumps (dump.c): profiles written to files (PPROF_DUMP_DIR) at exit, on
 *   a signal the operator chooses and at an interval, for batch jobs and
 *   programs that live seconds.
 *
 * Contexts: the init functions run in the constructor; the fork handlers
 * run in the forking thread (prepare, parent) and in the child's only
 * thread (child); the dump signal handler runs anywhere; everything else
 * runs on the agent's own threads or in the host's exit path.
 */
#ifndef PPROF_OPS_H
#define PPROF_OPS_H

#include <stddef.h>
#include <sys/types.h>

/* ---- configuration (config.c) --------------------------------------------- */

enum children_policy { CHILDREN_OFF = 0, CHILDREN_SERVE = 1 };

extern char opt_run_dir[1024];   /* PPROF_RUN_DIR, "" = off */
extern int opt_children;         /* PPROF_CHILDREN */
extern char opt_dump_dir[1024];  /* PPROF_DUMP_DIR, "" = off */
extern int opt_dump_signal;      /* PPROF_DUMP_SIGNAL, 0 = none */
extern long opt_dump_interval;   /* PPROF_DUMP_INTERVAL, seconds; 0 = none */
extern long opt_start_delay_ms;  /* PPROF_START_DELAY_MS; 0 = in the constructor */

/* Reads PPROF_RUN_DIR, PPROF_CHILDREN, PPROF_DUMP_DIR, PPROF_DUMP_SIGNAL and
 * PPROF_DUMP_INTERVAL (bad values: one line, then the default). Called by
 * config_load(). Not async-signal-safe. */
void config_load_ops(void);

/* ---- run directory (rundir.c) --------------------------------------------- */

/* Longest family id, with its terminating NUL. */
#define RUNDIR_FAMILY_MAX 48

/* One announced process, as read back from the run directory. */
struct rundir_entry {
    int pid;
    int ppid;
    char program[64];
    char addr[96]; /* host:port */
    char family[RUNDIR_FAMILY_MAX]; /* "" when announced without one */
};

/*
 * Creates this process's announcement file (empty) and keeps a descriptor
 * on it, so it can be filled later even after the process gave up the
 * rights to write in the directory (nginx workers switch to an unprivileged
 * user right after fork). Creates the directory (mode 0700) when missing,
 * and refuses one that is not this user's or that others can write to.
 * Returns 0 or -errno (logged once). Uses only system calls: safe in a fork
 * child handler. Not async-signal-safe (the log line).
 */
int rundir_reserve(void);

/*
 * Sets this process's family id (rundir.c's opening comment): from
 * PPROF_FAMILY when valid, else from the parent's announcement, else a new
 * family ("pid.starttime" of this process), and puts it in PPROF_FAMILY for
 * exec'd children. Nothing when the run directory is off. Called once by
 * the constructor, before main(). Not async-signal-safe.
 */
void rundir_family_init(void);

/* This process's family id ("" when the run directory is off).
 * Async-signal-safe. */
const char *rundir_family(void);

/* Writes "pid ppid starttime program host:port family\n" into this
 * process's file with one write (reserving it first when needed). Returns
 * 0 or -errno. Not async-signal-safe. */
int rundir_publish(const char *addr);

/* Removes this process's file (at exit). Async-signal-safe. */
void rundir_remove(void);

/* Calls fn for every announced process of this process's family still
 * alive (pid exists with the announced start time) and removes the files
 * of dead processes, whatever their family. Returns how many were listed.
 * Not async-signal-safe. */
size_t rundir_list(void (*fn)(void *arg, const struct rundir_entry *e),
                   void *arg);

/* Program name of this process (its /proc comm, at most 15 characters).
 * Not async-signal-safe. */
void rundir_program(char *out, size_t size);

/* ---- children (children.c) ------------------------------------------------ */

/* Registers the fork handlers. Called once by the constructor.
 * Not async-signal-safe. */
void children_init(void);

/* 1 in a process that was forked (without exec) from one under the agent. */
extern int children_is_forked;

/* Whether this process writes PPROF_PORT_FILE: yes unless it is a forked
 * child whose parent still lives (the file names the parent; a daemon
 * whose parent exited takes it over). Not async-signal-safe. */
int children_port_file(void);

/* When the configured port cannot be had and a run directory is in use,
 * rewrites addr (civetweb's syntax) to port 0 on the same host and returns
 * 1; otherwise 0. Not async-signal-safe. */
int children_port0(char *addr, size_t size);

/* Called by the server once it listens on port: announces this process in
 * the run directory (reserving its file first when not done yet).
 * Not async-signal-safe. */
void children_announce(int port);

/* ---- deferred start (start.c) ------------------------------------------- */

/* Creates the agent thread that, after opt_start_delay_ms, starts the dumps
 * (when dumps is set: a forked child's) and the server (unless serving is
 * off, or this is a forked child and PPROF_CHILDREN=off). Returns 0 or
 * -errno (no thread). Not async-signal-safe; may be called in a fork
 * child handler. */
int start_later(int dumps);

/* Starts the server now, unless it was started already in this process.
 * Not async-signal-safe. */
void start_now(void);

/* Called by the credential hooks before the host changes its user or group
 * while it is root: creates the announcement file and the port file while
 * the process may, unless the server started already. Once per process;
 * nothing in a forked child. Not async-signal-safe. */
void start_before_drop(void);

/* ---- dumps (dump.c) ------------------------------------------------------- */

/* When PPROF_DUMP_DIR is set: starts the whole-run CPU profile, installs
 * the dump signal's handler (unless the host handles that signal), starts
 * the dump thread and registers the exit dump. Also called in a forked
 * child (children.c) to start that child's own dumps. Not
 * async-signal-safe. */
void dump_start(void);

/* Resets the dumper's state in a fork child (the dump thread is gone).
 * Async-signal-safe. */
void dump_fork_child(void);

/* Writes every dump profile now, on the calling thread (the dump thread or
 * the exit path). reason is "exit", "signal" or "interval". Returns the
 * number of files written. Not async-signal-safe. */
int dump_now(const char *reason);

/* Files written since start (read with a relaxed atomic load). */
extern long dump_files_written;

#endif
