/*
 * The fork policy: what the agent does in a child forked without exec,
 * and in a process exec'd by one under the agent.
 *
 * A child has none of its parent's threads, so none of the agent's: no
 * server, no dump thread, no CPU timers (cpu_timer.c resets the profiler).
 * With PPROF_CHILDREN=serve (the default) and a parent that served, the
 * child gets a server of its own, so that every worker of nginx, PostgreSQL
 * or a prefork server can be profiled, and announces it in the run
 * directory (rundir.c): on the configured port when it is free (the parent
 * exited: a daemon's first fork), otherwise on port 0 of the same host.
 *
 * The fork child step (agent/fork.c) runs before the host's own child
 * handlers, which may still hold the host's allocator lock: it resets the
 * agent's state that a thread of the parent may have held at fork time
 * and notes that a start is due, nothing more. The after step, once the
 * host's handlers ran (fork.c), leaves the rest to the deferred start
 * (start.c): one small agent thread that starts the server once the child
 * has lived PPROF_START_DELAY_MS, so a child that execs or exits at once
 * (a shell running a command, a daemon's first fork) pays one thread
 * creation and never binds a port. A child running as root creates its
 * announcement file when it changes its user or group (cred_hooks.c),
 * while it still may: nginx workers switch to an unprivileged user before
 * their server starts; a child that never does creates it when its server
 * starts.
 *
 * Descendants stay passive until asked. An exec'd process runs the agent's
 * constructor afresh (LD_PRELOAD is inherited); one exec'd by another
 * process under the agent (its PPROF_FAMILY names that one, rundir.c)
 * starts no thread, binds no port, writes no file and says nothing, and
 * neither do the children it forks, unless PPROF_EXEC_CHILDREN=serve: a
 * shell in a tmux pane, the processes of a build, Chromium's zygote (which
 * aborts when it has a second thread). Without PPROF_DUMP_DIR it records
 * nothing either (init.c turns the agent off there). An exec'd descendant
 * never writes PPROF_PORT_FILE: the file names the process started with
 * it.
 *
 * The agent's state is the process's it was set up in (own_pid): a process
 * made without fork handlers (a raw clone, _Fork, vfork) has another pid,
 * and the shell acts on nothing there (children_own).
 *
 * Contexts: the prepare and parent steps run in the host's forking thread;
 * the child and after steps in the child's only thread.
 */
#include "agent/compiler.h"
#include "process/process.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/host/fds.h"
#include "agent/guard.h"
#include "agent/log.h"
#include "agent/host/proc.h"
#include "agent/core/push.h"
#include "agent/symbols/symbols.h"
#include "agent/threads/threads.h"
#include "process/push.h"
#include "http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int children_is_forked FORK_STATE;
/* The process this one was forked from (0: not forked). */
static int forked_from FORK_STATE;
/* The pid the agent's state is for: the constructor's process, or the
 * child the fork child step ran in. */
static int own_pid FORK_STATE;
/* 1 in an exec'd descendant (and the children it forks): it does not
 * serve unless PPROF_EXEC_CHILDREN=serve. */
static int exec_child;
/* 1 from the fork child step to the after step: the child's own start is
 * due (its dumps: start_dumps). */
static int start_pending FORK_STATE, start_dumps FORK_STATE;

/* The pid from the kernel (the C library's may be the parent's in a raw
 * clone child). */
static int pid_now(void)
{
    return (int)real_syscall(SYS_getpid);
}

int children_own(void)
{
    return own_pid == pid_now();
}

int children_own_pid(void)
{
    return own_pid;
}

int children_passive(void)
{
    return exec_child && opt_exec_children != CHILDREN_SERVE;
}

int children_port_file(void)
{
    /* An heir's is written by the process that handed it the role. */
    return !exec_child && !children_parent_lives() && !role_relays_port();
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
static int listen_fd FORK_STATE = -1;
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

FORK_PATH static int is_listener(int fd, int port)
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
    role_listening(port);
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
static int forking_pid FORK_STATE;

/* Forks this process made through fork() (its prepare step ran), for
 * the serving role (role.c): a wrapper forks once. */
static int forks_made FORK_STATE;

int children_forks(void)
{
    return __atomic_load_n(&forks_made, __ATOMIC_RELAXED);
}

FORK_PATH void children_fork_prepare(void)
{
    forking_pid = (int)getpid();
    role_fork_prepare(__atomic_add_fetch(&forks_made, 1, __ATOMIC_RELAXED) ==
                      1);
}

FORK_PATH void children_fork_child(void)
{
    own_pid = pid_now();
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
    FORK_SET(listen_fd, -1);
    int serve = opt_serve && opt_children == CHILDREN_SERVE &&
                !children_passive();
    int push = opt_children == CHILDREN_SERVE && !children_passive() &&
               opt_push.on;
    FORK_SET(start_pending, agent_ready && (serve || push || opt_dump_dir[0]));
    FORK_SET(start_dumps, opt_dump_dir[0] != '\0');
    /* The configured port first: free again when the parent exited (a
     * daemon's first fork: the daemon then serves where the operator
     * expects it); taken while the parent lives (a worker), and then
     * server_start() falls back to port 0. The parent's port file names
     * the parent; the child is found through the run directory, unless
     * the parent is gone by the time the child serves (a daemon's fork:
     * children_port_file). */
    if (serve)
        FORK_SET(forked_from, forking_pid);
}

FORK_PATH void children_after_fork(void)
{
    if (!start_pending || !children_own())
        return;
    start_pending = 0;
    /* The deferred start (start.c) starts the child's dumps and server:
     * a child that execs or exits before it shows it lives on creates no
     * thread, and one that execs or exits before the delay never binds a
     * port. */
    start_arm(start_dumps, own_pid);
}

void children_take_role(void)
{
    exec_child = 0;
    config_exec_child = 0;
    const char *level = getenv("PPROF_LOG");
    if ((!level || !level[0]) && opt_log_level < LOG_INFO)
        opt_log_level = LOG_INFO;
}

COMMON_PATH static void at_exit(void)
{
    start_leave();
    rundir_leave();
}

void children_init(void)
{
    own_pid = pid_now();
    rundir_family_init();
    exec_child = config_exec_child || rundir_family_inherited();
    rundir_adopt();
    atexit(at_exit);
}
