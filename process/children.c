/*
 * The fork policy: what the agent does in a child forked without exec.
 *
 * A child has none of its parent's threads, so none of the agent's: no
 * server, no dump thread, no CPU timers (cpu_timer.c resets the profiler).
 * With PPROF_CHILDREN=serve (the default) and a parent that served, the
 * child gets a server of its own, so that every worker of nginx, PostgreSQL
 * or a prefork server can be profiled, and announces it in the run
 * directory (rundir.c): on the configured port when it is free (the parent
 * exited: a daemon's first fork), otherwise on port 0 of the same host.
 *
 * The fork child handler only does what is safe in a fresh child: it
 * resets the agent's state that a thread of the parent may have held at
 * fork time, creates the child's announcement file when the child runs as
 * root (while it still has its parent's rights) and leaves the rest to the
 * deferred start (start.c): one small agent thread that starts the server
 * once the child has lived PPROF_START_DELAY_MS, so a child that execs or
 * exits at once (a shell running a command, a daemon's first fork) pays
 * one thread creation and never binds a port. An exec'd child
 * runs the agent's constructor afresh (LD_PRELOAD is inherited): with a
 * fixed PPROF_ADDR port taken by its parent it falls back to port 0 and
 * announces itself (server.c).
 *
 * Contexts: the prepare and parent handlers run in the host's forking
 * thread; the child handler in the child's only thread.
 */
#include "process/process.h"

#include "agent/agent.h"
#include "agent/fds.h"
#include "agent/proc.h"
#include "agent/push.h"
#include "agent/symbols.h"
#include "agent/threads.h"
#include "process/push.h"
#include "http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int children_is_forked;
/* The process this one was forked from (0: not forked). */
static int forked_from;

int children_port_file(void)
{
    return !children_parent_lives();
}

int children_parent_lives(void)
{
    return children_is_forked && (int)getppid() == forked_from;
}

/* Rewrites opt_addr (civetweb's syntax, "host:port" or "port") to port 0
 * on the same host. */
static void addr_port_zero(void)
{
    char *colon = strrchr(opt_addr, ':');
    if (colon && colon[1] != ']')
        memcpy(colon + 1, "0", 2);
    else
        memcpy(opt_addr, "0", 2);
}

static int addr_port(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    long port = -1;
    config_parse_long(colon ? colon + 1 : addr, 0, 65535, &port);
    return (int)port;
}

int children_port0(char *addr, size_t size)
{
    if ((!opt_run_dir[0] && !children_is_forked) || addr != opt_addr ||
        size != sizeof opt_addr || addr_port(addr) == 0)
        return 0;
    addr_port_zero();
    return 1;
}

/* The server's listening socket, found once it listens: a forked child
 * inherits it, and must let it go (below). -1: not known. */
static int listen_fd = -1;
static int listen_port;

static int local_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

static int is_listener(int fd, int port)
{
    int on = 0;
    socklen_t len = sizeof on;
    return local_port(fd) == port &&
           getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on;
}

static int take_listener(void *arg, int fd, int dir_fd)
{
    int port = *(const int *)arg;
    if (fd == dir_fd || fd > 1 << 20 || !is_listener(fd, port))
        return 0;
    listen_fd = fd;
    return 1;
}

/* Finds the listening socket on port among the open descriptors. */
static void find_listener(int port)
{
    listen_fd = -1;
    listen_port = port;
    proc_list("/proc/self/fd", take_listener, &port);
}

void children_announce(int port)
{
    find_listener(port);
    if (!opt_run_dir[0])
        return;
    char addr[256];
    server_address(addr, sizeof addr);
    rundir_publish(addr);
}

/* The forking process's pid, taken before the fork: in the child,
 * getppid() is already 1 (or a subreaper) when a daemon's parent exits
 * before the child's fork handler runs, and the child would then take
 * its new parent for the one it was forked from. */
static int forking_pid;

void children_fork_prepare(void)
{
    forking_pid = (int)getpid();
}

void children_fork_child(void)
{
    children_is_forked = 1;
    /* The dumper's thread and the server's are the parent's. */
    dump_fork_child();
    server_fork_child();
    push_fork_child();
    /* The parent's listening socket came along with the fork. Nobody here
     * accepts on it: held open, it would keep the port bound after the
     * parent exits (a daemon's first fork) with connections queuing on it
     * for ever. */
    if (listen_fd >= 0 && is_listener(listen_fd, listen_port))
        fds_close(listen_fd);
    listen_fd = -1;
    int serve = opt_serve && opt_children == CHILDREN_SERVE;
    int push = opt_push.on && opt_children == CHILDREN_SERVE;
    if (!agent_ready || (!serve && !opt_dump_dir[0] && !push))
        return;
    if (serve) {
        /* The configured port first: free again when the parent exited
         * (a daemon's first fork: the daemon then serves where the operator
         * expects it); taken while the parent lives (a worker), and then
         * server_start() falls back to port 0. */
        /* The parent's port file names the parent; the child is found
         * through the run directory, unless the parent is gone by the
         * time the child serves (a daemon's fork: children_port_file). */
        forked_from = forking_pid;
        /* A privileged child may give up its rights before its server
         * starts (nginx workers switch to an unprivileged user at once):
         * it creates its announcement file now, while it still may. Others
         * create it when the server starts, so that a child that execs or
         * exits at once costs no file. */
        if (opt_run_dir[0] && geteuid() == 0)
            rundir_reserve();
    }

    /* The deferred start (start.c) starts the child's dumps and server:
     * a child that execs or exits before the delay never binds a port. */
    int err = start_later(opt_dump_dir[0] != '\0');
    if (err)
        log_info("forked child %d: cannot start the agent's thread (%s); "
                 "this child is not profiled",
                 (int)getpid(), strerror(-err));
}

static void at_exit(void)
{
    rundir_remove();
}

void children_init(void)
{
    rundir_family_init();
    rundir_adopt();
    atexit(at_exit);
}
