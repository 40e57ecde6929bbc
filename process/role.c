/*
 * The serving role handed down by a forking wrapper (timeout, runuser,
 * su, tini, dumb-init, bwrap): the process started by hand forks the
 * service and only waits for it, so the process that does the work is an
 * exec'd descendant, which stays passive (children.c). The rule:
 *
 * - The wrapper's side (role_down, on its starter once the start delay
 *   ended, before the server starts): when the process has no host thread
 *   but its main one, exactly one child, which is the only one it forked
 *   through fork() (vfork, posix_spawn and bwrap's raw clone are not
 *   counted), and that main thread is blocked
 *   in a call that only waits for a child or a signal (wait4, waitid,
 *   sigsuspend, pause, sigtimedwait, or a poll whose every descriptor is a
 *   signalfd), the role is offered to that child: a listening socket in
 *   the abstract namespace named for the child's pid and start time. The
 *   child takes it by connecting; then this process starts nothing and
 *   watches the connection, which ends with the heir (or its image). A
 *   child that does not take it within ROLE_GRACE_MS, or an heir that
 *   ended while this process lives on (a script's next command), leaves
 *   the role here: the server starts as it always did.
 * - The child's side (role_candidate, in the constructor of an exec'd
 *   descendant): the parent names its first child, so a child reads no
 *   file to know it is not one. A process that may offer the role (one
 *   started by hand that would serve: role_hand_down; a candidate, in
 *   turn) sets PPROF_ROLE_FROM=<pid>.<generation>.<parent> in its
 *   constructor, on its only thread, and blanks it in place (blank(): its
 *   first digit becomes '-') once a later child cannot be the heir: its
 *   second fork(), a fork after the host created a thread
 *   (role_fork_prepare), a child its wait reported (trace_child_waited:
 *   dash vforks a script's commands, which passes no fork handler). An
 *   exec'd descendant whose variable is absent or blanked is a
 *   pass-through with no system call more than before the role existed
 *   (a script's later commands). One whose variable names its parent
 *   (getppid), or itself with its parent (a candidate's later image: su's
 *   shell execs the command), MAX_DEPTH generations at most, and whose
 *   parent has it as its only child and reaped none (/proc: a parent that
 *   posix_spawn'd it blanked nothing) is a candidate: the agent stays
 *   on, but records no heap
 *   sample and creates no thread: its start is armed (agent/core/arm.h), and
 *   its own calls look for the offer (candidate_fire: one connect every
 *   ROLE_LOOK_NS at most) until it connects or gives up (the parent
 *   changed, a sandbox went in, CANDIDATE_S passed), having started
 *   nothing, said nothing and written nothing: a browser's zygote keeps
 *   its one thread. Connected, its starter is created and runs at once;
 *   it serves as a process started by hand: the configured
 *   address, PPROF_PORT_FILE, the serving line at the default level, which
 *   names the process that handed the role down (as the index does).
 *
 * A shell running a script (sh -c 'cmd1; cmd2') looks like a wrapper while
 * its first command runs: that command, when it outlives the delay, serves
 * until it ends, and the shell after it; its later commands are never
 * offered the role. A process whose threads do work,
 * serve, or have more than one child keeps the role.
 *
 * Contexts: role_candidate and role_arm in the constructor;
 * candidate_fire on a host thread, in a call that fired the armed start
 * (guard entered, no signal blocked); role_gate and role_down on the
 * agent's starter thread (guard entered).
 */
#include "process/process.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/core/arm.h"
#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/host/fds.h"
#include "agent/guard.h"
#include "agent/heap/heap.h"
#include "agent/log.h"
#include "agent/host/proc.h"
#include "agent/threads/thread_hooks.h"
#include "agent/trace/trace.h"
#include "encoder/encoder.h"
#include "http/server.h"

#include <errno.h>
#include <sys/single_threaded.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#pragma weak __libc_single_threaded

/* Generations between a candidate and the process started by hand. */
#define MAX_DEPTH 3
/* The variable naming the process an exec'd child may take the role from:
 * "<pid>.<generation>.<its parent's pid>". */
#define ROLE_FROM "PPROF_ROLE_FROM"
/* How long a candidate looks for the offer, from its start. */
#define CANDIDATE_S 10
/* How often it looks. */
#define ROLE_LOOK_NS 50000000LL
/* How long an offer waits for the child (and, after the heir's image
 * exec'd another, for the next one). */
#define ROLE_GRACE_MS 1000
/* The wrapper's look at its main thread: tries, and the pause between
 * them (tini wakes every second to reap). */
#define LOOK_TRIES 10
#define LOOK_PAUSE_NS 20000000L

/* Written by the constructor, then read by the starter only. */
static int candidate;
static int64_t candidate_until_ns;
static int candidate_ppid;
/* The heir's connection to the process that handed the role down; the
 * wrapper's offer and its end of that connection (held: a host's dup2
 * onto the number rewrites it, agent/host/fds.h). */
static int role_fd = -1, offer_fd = -1, heir_fd = -1;

static int pid_now(void)
{
    return (int)real_syscall(SYS_getpid);
}

/* The children of pid's main thread (world-readable): how many, the
 * first in *first. -1 when unreadable. */
STARTUP static int children_of(int pid, int *first)
{
    char path[80], buf[256];
    log_snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
    ssize_t n = proc_read(path, buf, sizeof buf);
    if (n < 0)
        return -1;
    int count = 0;
    char *p = buf;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        if (count++ == 0)
            *first = (int)v;
        p = end;
        while (*p == ' ' || *p == '\n')
            p++;
    }
    return count;
}

/* The value of PPROF_ROLE_FROM this process set (its own string, from
 * setenv), NULL when it set none. */
static char *from_value;

static int single_threaded(void)
{
    return &__libc_single_threaded && __libc_single_threaded;
}

/* No later child is a candidate: the value's first character becomes
 * '-', in place. One byte, the length kept: another thread's execve or
 * getenv meanwhile sees either value whole. Async-signal-safe. */
static void blank(void)
{
    if (from_value && from_value[0] != '-')
        __atomic_store_n(&from_value[0], '-', __ATOMIC_RELAXED);
}

/* Names this process, generation gen below the one started by hand,
 * whose parent is parent, as the one its exec'd first child may take the
 * role from (and a later image of itself, with the same parent). In the
 * constructor, on the only thread. */
static void hand_down(int gen, int parent)
{
    if (!single_threaded())
        return;
    char value[64];
    log_snprintf(value, sizeof value, "%d.%d.%d", pid_now(), gen, parent);
    if (setenv(ROLE_FROM, value, 1) != 0)
        return;
    from_value = getenv(ROLE_FROM);
    /* A child reaped (a script's first command, vfork'd by dash, which
     * passes no fork handler): the next one is not the first. */
    __atomic_store_n(&trace_child_waited, blank, __ATOMIC_RELEASE);
}

void role_hand_down(void)
{
    hand_down(0, 0);
}

FORK_PATH void role_fork_prepare(int first)
{
    /* A second fork, or one made after the host created a thread (a
     * wrapper forks once, from its only thread; the agent's starter is
     * not counted): neither this child nor any later is a candidate.
     * Before the fork, so the child copies the blanked value. */
    if (!first || __atomic_load_n(&threads_created, __ATOMIC_RELAXED) > 0)
        blank();
}

STARTUP int role_candidate(void)
{
    /* The common case: no variable, or a blanked one, costs nothing. */
    const char *from = getenv(ROLE_FROM);
    if (!from || from[0] < '1' || from[0] > '9')
        return 0;
    char *p;
    long named = strtol(from, &p, 10);
    long gen = *p == '.' ? strtol(p + 1, &p, 10) : -1;
    long named_parent = *p == '.' ? strtol(p + 1, NULL, 10) : -1;
    int parent = (int)getppid();
    if (gen < 0 || parent <= 1)
        return 0;
    if (named == parent)
        gen++; /* its first child */
    else if (named != pid_now() || named_parent != parent || gen == 0)
        return 0; /* unless a candidate's earlier image (su's shell's exec) */
    /* A parent that posix_spawn'd this one (no fork handler blanked the
     * variable): one child, this one, and none reaped before (its
     * children's minor faults, field 11). */
    int only = 0;
    if (gen > MAX_DEPTH || children_of(parent, &only) != 1 ||
        only != pid_now() || proc_stat_field(parent, 11) != 0)
        return 0;
    candidate = 1;
    candidate_ppid = parent;
    candidate_until_ns = agent_mono_ns() + CANDIDATE_S * 1000000000LL;
    hand_down((int)gen, parent);
    return 1;
}

/* The abstract socket's address for the child pid (and its start time). */
static socklen_t role_addr(struct sockaddr_un *a, int pid)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t n = log_snprintf(a->sun_path + 1, sizeof a->sun_path - 1,
                            "pprofagent-role-%d.%llu", pid,
                            proc_stat_field(pid, 22));
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int new_socket(void)
{
    fds_begin();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    role_fd = fds_adopt(fd, FDS_HELD, &role_fd);
    fds_end();
    return role_fd;
}

/* The name of pid (its comm), for the serving line. */
static void comm_of(int pid, char *out, size_t size)
{
    char path[64];
    log_snprintf(path, sizeof path, "/proc/%d/comm", pid);
    ssize_t n = proc_read(path, out, size);
    if (n <= 0)
        log_snprintf(out, size, "?");
    else
        out[strcspn(out, "\n")] = '\0';
}

/* One look for the offer: 1 when connected (the role is this process's). */
static int look_for_offer(void)
{
    struct sockaddr_un a;
    socklen_t len = role_addr(&a, pid_now());
    if (new_socket() < 0)
        return 0;
    if (real_connect(role_fd, (struct sockaddr *)&a, len) == 0)
        return 1;
    fds_close(role_fd);
    role_fd = -1;
    return 0;
}

/* The candidate's armed start (agent/core/arm.h), fired by its own calls on a
 * host thread (guard entered): no thread until the role is offered, so a
 * process nobody hands it to (a browser's zygote, which aborts with a
 * second thread) never has one. One look every ROLE_LOOK_NS at most
 * (three system calls), CANDIDATE_S from the start at most. */
static int64_t candidate_deadline_ns, next_look_ns;

static void candidate_fire(void)
{
    int64_t now = agent_mono_ns();
    if (now >= candidate_until_ns || (int)getppid() != candidate_ppid ||
        agent_sandboxed) {
        /* Not the heir: off for good, as any passive descendant. */
        candidate = 0;
        __atomic_store_n(&heap_enabled, -1, __ATOMIC_RELEASE);
        return;
    }
    if (now >= next_look_ns) {
        next_look_ns = now + ROLE_LOOK_NS;
        if (look_for_offer()) {
            /* The starter starts at once: the process lived its delay
             * as a candidate. */
            if (start_later(0, now - opt_start_delay_ms * 1000000LL) != 0) {
                fds_close(role_fd);
                role_fd = -1;
                candidate = 0;
            }
            return;
        }
    }
    arm_set(candidate_fire, candidate_deadline_ns, pid_now());
}

void role_arm(void)
{
    candidate_deadline_ns = agent_mono_ns() + opt_start_delay_ms * 1000000LL;
    arm_set(candidate_fire, candidate_deadline_ns, pid_now());
}

int role_gate(int (*gone)(void))
{
    if (candidate) {
        candidate = 0;
        if (role_fd < 0)
            return 1; /* not the heir (the starter runs only once it is) */
        int off = 0;
        __atomic_compare_exchange_n(&heap_enabled, &off, 1, 0,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
        char by[64], note[160];
        /* The process that offered it: the wrapper (su), which may be an
         * ancestor further up than the parent (su's shell). */
        int parent = (int)getppid();
        struct ucred cred;
        socklen_t clen = sizeof cred;
        if (getsockopt(role_fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 &&
            cred.pid > 0)
            parent = (int)cred.pid;
        comm_of(parent, by, sizeof by);
        children_take_role();
        log_snprintf(note, sizeof note, "handed down by %s pid %d", by,
                     parent);
        server_role_note(note);
        log_snprintf(note, sizeof note,
                     "pid %d serves: the role was handed down by %s pid %d, "
                     "which only waits for it (docs/operations.md)",
                     pid_now(), by, parent);
        notes_set("serving", note);
    }
    return role_down(gone);
}

int role_relays_port(void)
{
    return role_fd >= 0;
}

void role_listening(int port)
{
    char line[16];
    size_t n = log_snprintf(line, sizeof line, "%d\n", port);
    if (role_fd >= 0 && real_write(role_fd, line, n) != (ssize_t)n)
        log_debug("cannot tell the process that handed the role down "
                  "where this one serves: %s", log_errtext(errno));
}

/* ---- the wrapper's side --------------------------------------------------- */

/* 1 when every descriptor of the poll blocked in (pollfd array at addr,
 * n of them, in this process's memory) is a signalfd (bwrap). */
static int polls_signals(unsigned long addr, unsigned long n)
{
    struct pollfd fds[8];
    if (n == 0 || n > 8)
        return 0;
    struct iovec local = {fds, n * sizeof fds[0]};
    struct iovec remote = {(void *)addr, n * sizeof fds[0]};
    /* Read with the kernel's copy: an address gone meanwhile is EFAULT. */
    if (process_vm_readv(pid_now(), &local, 1, &remote, 1, 0) !=
        (ssize_t)(n * sizeof fds[0]))
        return 0;
    for (unsigned long i = 0; i < n; i++) {
        char path[64], target[64];
        log_snprintf(path, sizeof path, "/proc/self/fd/%d", fds[i].fd);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            return 0;
        target[len] = '\0';
        if (strcmp(target, "anon_inode:[signalfd]") != 0)
            return 0;
    }
    return 1;
}

/* 1 when the main thread of pid (this process, or a descendant) is
 * blocked in a call that only waits for a child or a signal (its /proc
 * syscall line: number and arguments; a descendant's poll is not looked
 * into). */
static int only_waits(int pid)
{
    char path[64], buf[256];
    log_snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", pid, pid);
    if (proc_read(path, buf, sizeof buf) <= 0)
        return 0;
    char *p = buf;
    long nr = strtol(p, &p, 10);
    unsigned long arg0 = strtoul(p, &p, 16);
    unsigned long arg1 = strtoul(p, &p, 16);
    switch (nr) {
    case SYS_wait4:
    case SYS_waitid:
    case SYS_rt_sigsuspend:
    case SYS_pause:
    case SYS_rt_sigtimedwait:
        return 1;
    case SYS_poll:
    case SYS_ppoll:
        return pid == pid_now() && polls_signals(arg0, arg1);
    default:
        return 0;
    }
}

/* Down a chain of processes that each only wait for their only child
 * (su's shell, which forks the command): the last one, where the work is.
 * A link this process may not look into ends the chain. */
static int last_waited(int child)
{
    for (int depth = 1; depth < MAX_DEPTH; depth++) {
        int next = 0;
        if (proc_stat_field(child, 20) > 2 || children_of(child, &next) != 1 ||
            !only_waits(child))
            break;
        child = next;
    }
    return child;
}

/* The child the role may go to: this process's only one, and the only
 * one it forked (a script's later commands are not offered the role), its main thread
 * only waiting, no other host thread (this one is the agent's starter).
 * 0 when there is none. */
static int heir_wanted(void)
{
    if (!opt_serve || children_is_forked || children_passive() ||
        sandbox_installed())
        return 0;
    for (int i = 0; i < LOOK_TRIES; i++) {
        int child = 0;
        if (proc_stat_field(pid_now(), 20) != 2 || children_forks() > 1 ||
            children_of(pid_now(), &child) != 1)
            return 0;
        if (only_waits(pid_now()))
            return child;
        struct timespec nap = {0, LOOK_PAUSE_NS};
        real_nanosleep(&nap, NULL);
    }
    return 0;
}

/* 1 while pid is the process that was started at start. */
static int same_process(int pid, unsigned long long start)
{
    return start != 0 && proc_stat_field(pid, 22) == start;
}

/* Waits on fd for input (a connection, or the heir's end) in WATCH slices,
 * grace_ms at most (-1: no limit). 1: ready; 0: timed out; -1: gone() or
 * the child ended. */
static int wait_on(int fd, int grace_ms, int (*gone)(void), int child,
                   unsigned long long start)
{
    int64_t until = agent_mono_ns() + (int64_t)grace_ms * 1000000LL;
    for (;;) {
        if (gone())
            return -1;
        struct pollfd p = {fd, POLLIN, 0};
        int r = real_poll(&p, 1, 100);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
        if (!same_process(child, start))
            return -1;
        if (grace_ms >= 0 && agent_mono_ns() >= until)
            return 0;
    }
}

/* Reads the heir's port line and writes PPROF_PORT_FILE with it.
 * Returns 0 at the connection's end. */
static int relay_port(void)
{
    char buf[32];
    ssize_t n = real_read(heir_fd, buf, sizeof buf - 1);
    if (n <= 0)
        return n < 0 && (errno == EINTR || errno == EAGAIN);
    buf[n] = '\0';
    long port = strtol(buf, NULL, 10);
    if (port > 0 && port < 65536)
        server_write_port_file((int)port);
    return 1;
}

/* Listens for pid under its role name; 0 or -1. */
static int offer(int pid)
{
    if (offer_fd >= 0)
        fds_close(offer_fd);
    struct sockaddr_un a;
    socklen_t len = role_addr(&a, pid);
    fds_begin();
    offer_fd = fds_adopt(
        socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0),
        FDS_HELD, &offer_fd);
    fds_end();
    if (offer_fd >= 0 && bind(offer_fd, (struct sockaddr *)&a, len) == 0 &&
        listen(offer_fd, 4) == 0)
        return 0;
    if (offer_fd >= 0)
        fds_close(offer_fd);
    offer_fd = -1;
    return -1;
}

/* Holds the role for the heir while its connection lasts, writing the
 * port it sends to PPROF_PORT_FILE (the heir may have given up the rights
 * to its folder). Returns -1 when gone() or the child ended, 1 when the
 * connection ended (the heir's image exec'd another). */
static int hold(int (*gone)(void), int child, unsigned long long start)
{
    int r;
    while ((r = wait_on(heir_fd, -1, gone, child, start)) > 0 && relay_port())
        ;
    fds_close(heir_fd);
    heir_fd = -1;
    return r < 0 ? -1 : 1;
}

int role_down(int (*gone)(void))
{
    int first = heir_wanted();
    if (!first)
        return 0;
    int child = last_waited(first);
    unsigned long long start = proc_stat_field(child, 22);
    if (offer(child) != 0)
        return 0;
    char name[64];
    comm_of(child, name, sizeof name);
    int handed = 0, ended = 0;
    int64_t until = agent_mono_ns() + ROLE_GRACE_MS * 1000000LL;
    /* Offered; then held while the heir (or its next image) holds it. */
    for (;;) {
        int r = wait_on(offer_fd, 100, gone, child, start);
        if (r < 0) {
            ended = gone();
            break;
        }
        if (r == 0) {
            if (agent_mono_ns() >= until)
                break; /* not taken: the role stays here */
            /* The chain grew meanwhile (su's shell forked the command). */
            int last = handed ? child : last_waited(first);
            if (last != child && offer(last) == 0) {
                child = last;
                start = proc_stat_field(child, 22);
                comm_of(child, name, sizeof name);
            }
            continue;
        }
        fds_begin();
        heir_fd = fds_adopt(accept4(offer_fd, NULL, NULL, SOCK_CLOEXEC),
                            FDS_HELD, &heir_fd);
        fds_end();
        if (heir_fd < 0)
            continue;
        if (!handed)
            log_debug("the serving role goes to %s pid %d, which this "
                      "process only waits for",
                      name, child);
        handed = 1;
        if (hold(gone, child, start) < 0) {
            ended = gone();
            break;
        }
        until = agent_mono_ns() + ROLE_GRACE_MS * 1000000LL;
    }
    if (offer_fd >= 0)
        fds_close(offer_fd);
    offer_fd = -1;
    if (ended)
        return 1;
    if (handed) {
        char note[160];
        log_snprintf(note, sizeof note,
                     "pid %d serves: %s pid %d held the role until it ended",
                     pid_now(), name, child);
        notes_set("serving", note);
    }
    return 0;
}
