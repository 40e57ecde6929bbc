/*
 * The blocking calls the execution trace records, interposed: reads and
 * writes, socket transfers and connects, poll/select/epoll waits, sleeps,
 * file syncs, and pthread_setname_np (a thread's new name). accept, recv
 * and send are agent/host/fds.c's, which times them the same way.
 *
 * Entered on every host thread, for every such call. A hook is one
 * indirect jump through its route: the real function while no trace runs
 * (nothing else: test/bench/trace.sh counts the instructions), its traced
 * twin while one does, which times the call and records it after it
 * returned (agent/trace/trace_rec.c), errno and the return value
 * untouched. trace_start() and trace_stop() switch every route
 * (trace_hooks_route); a call already inside a twin when the trace stops
 * finds trace_on clear and records nothing.
 *
 * What a call is: a socket's transfer is a network wait, as are poll,
 * select and epoll waits (Go's network poller is where its goroutines wait
 * for descriptors); a sleep is a sleep; anything else a system call. A
 * read or write learns whether its descriptor is a socket from fstat,
 * cached per descriptor for the trace.
 *
 * The waits for a child (wait, waitpid, wait3, wait4, waitid) are a call
 * through their route and one test after it: a child reported calls
 * trace_child_waited when set (process/role.c: a process that named its
 * first child as the one the serving role may go to un-names it).
 *
 * Calls the C library makes inside itself (fread's read) do not pass
 * through here: only the program's own calls are seen.
 *
 * In a process that is not dumpable (agent/threads/blocked.h) every route goes
 * through the call's noted twin first, which notes where the caller
 * entered the call (a few stores) and clears it when the call returns.
 */
#include "agent/trace/trace.h"
#include "agent/fork_step.h"

#include "agent/core/arm.h"
#include "agent/threads/blocked.h"
#include "agent/compiler.h"
#include "agent/core/next_symbol.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* The descriptor kinds a read or write may be (below). */
#define FD (-1)
static int fd_kind(int fd);

/* Every hooked call: its return type, name, parameters, arguments, what
 * it is (FD: what its descriptor is), the object it is on, and what it
 * does while the start is armed (agent/core/arm.h): its kind, and whether a
 * signal handler may call it. */
#define CALL_HOOKS(X)                                                          \
    X(ssize_t, read, (int fd, void *b, size_t n), (fd, b, n), FD, fd,         \
          ARM_LATE, 1)                                                         \
    X(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n), FD, fd,  \
          ARM_LATE, 1)                                                         \
    X(ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n), FD,  \
          fd, ARM_LATE, 1)                                                     \
    X(ssize_t, writev, (int fd, const struct iovec *v, int n), (fd, v, n), FD, \
          fd, ARM_LATE, 1)                                                     \
    X(ssize_t, pread, (int fd, void *b, size_t n, off_t o), (fd, b, n, o),     \
          TRACE_SYSCALL, fd, ARM_LATE, 1)                                      \
    X(ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o), (fd, b, n,  \
          o), TRACE_SYSCALL, fd, ARM_LATE, 1)                                  \
    X(ssize_t, recvfrom, (int fd, void *b, size_t n, int f, struct sockaddr    \
          *a, socklen_t *l), (fd, b, n, f, a, l), TRACE_NET, fd, ARM_WAIT, 1)  \
    X(ssize_t, sendto, (int fd, const void *b, size_t n, int f, const struct   \
          sockaddr *a, socklen_t l), (fd, b, n, f, a, l), TRACE_NET, fd,       \
          ARM_LATE, 1)                                                         \
    X(ssize_t, recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f),         \
          TRACE_NET, fd, ARM_WAIT, 1)                                          \
    X(ssize_t, sendmsg, (int fd, const struct msghdr *m, int f), (fd, m, f),   \
          TRACE_NET, fd, ARM_LATE, 1)                                          \
    X(int, connect, (int fd, const struct sockaddr *a, socklen_t l), (fd, a,   \
          l), TRACE_NET, fd, ARM_WAIT, 1)                                      \
    X(int, poll, (struct pollfd *p, nfds_t n, int t), (p, n, t), TRACE_NET, 0, \
          ARM_WAIT, 1)                                                         \
    X(int, ppoll, (struct pollfd *p, nfds_t n, const struct timespec *t, const \
          sigset_t *s), (p, n, t, s), TRACE_NET, 0, ARM_WAIT, 1)               \
    X(int, select, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval     \
          *t), (n, r, w, e, t), TRACE_NET, 0, ARM_WAIT, 1)                     \
    X(int, pselect, (int n, fd_set *r, fd_set *w, fd_set *e, const struct      \
          timespec *t, const sigset_t *s), (n, r, w, e, t, s), TRACE_NET, 0,   \
          ARM_WAIT, 1)                                                         \
    X(int, epoll_wait, (int fd, struct epoll_event *ev, int n, int t), (fd,    \
          ev, n, t), TRACE_NET, fd, ARM_WAIT, 0)                               \
    X(int, epoll_pwait, (int fd, struct epoll_event *ev, int n, int t, const   \
          sigset_t *s), (fd, ev, n, t, s), TRACE_NET, fd, ARM_WAIT, 0)         \
    X(int, nanosleep, (const struct timespec *r, struct timespec *m), (r, m),  \
          TRACE_SLEEP, 0, ARM_WAIT, 1)                                         \
    X(int, clock_nanosleep, (clockid_t c, int f, const struct timespec *r,     \
          struct timespec *m), (c, f, r, m), TRACE_SLEEP, 0, ARM_WAIT, 1)      \
    X(unsigned, sleep, (unsigned s), (s), TRACE_SLEEP, 0, ARM_WAIT, 1)         \
    X(int, usleep, (useconds_t u), (u), TRACE_SLEEP, 0, ARM_WAIT, 0)           \
    X(int, fsync, (int fd), (fd), TRACE_SYSCALL, fd, ARM_LATE, 1)              \
    X(int, fdatasync, (int fd), (fd), TRACE_SYSCALL, fd, ARM_LATE, 1)

/* The waits for a child: their exported names tell trace_child_waited
 * (below) when they reported one. */
#define CHILD_HOOKS(X)                                                         \
    X(pid_t, wait, (int *st), (st), TRACE_SYSCALL, 0, ARM_WAIT, 1)             \
    X(pid_t, waitpid, (pid_t p, int *st, int o), (p, st, o), TRACE_SYSCALL,    \
          0, CHILD_WAIT(o), 0)                                                 \
    X(pid_t, wait3, (int *st, int o, struct rusage *u), (st, o, u),            \
          TRACE_SYSCALL, 0, CHILD_WAIT(o), 0)                                  \
    X(pid_t, wait4, (pid_t p, int *st, int o, struct rusage *u), (p, st, o,    \
          u), TRACE_SYSCALL, 0, CHILD_WAIT(o), 0)                              \
    X(int, waitid, (idtype_t t, id_t i, siginfo_t *in, int o), (t, i, in, o),  \
          TRACE_SYSCALL, 0, CHILD_WAIT(o), 0)

#define TRACE_HOOKS(X) CALL_HOOKS(X) CHILD_HOOKS(X)

/* The system call each hooked function makes on this C library (the wall
 * profile's and the threads dump's label when a note gives the stack). */
#define NR_read SYS_read
#define NR_write SYS_write
#define NR_readv SYS_readv
#define NR_writev SYS_writev
#define NR_pread SYS_pread64
#define NR_pwrite SYS_pwrite64
#define NR_recvfrom SYS_recvfrom
#define NR_sendto SYS_sendto
#define NR_recvmsg SYS_recvmsg
#define NR_sendmsg SYS_sendmsg
#define NR_connect SYS_connect
#define NR_poll SYS_poll
#define NR_ppoll SYS_ppoll
#define NR_select SYS_select
#define NR_pselect SYS_pselect6
#define NR_epoll_wait SYS_epoll_wait
#define NR_epoll_pwait SYS_epoll_pwait
#define NR_nanosleep SYS_clock_nanosleep
#define NR_clock_nanosleep SYS_clock_nanosleep
#define NR_sleep SYS_clock_nanosleep
#define NR_usleep SYS_clock_nanosleep
#define NR_fsync SYS_fsync
#define NR_fdatasync SYS_fdatasync
#define NR_wait SYS_wait4
#define NR_waitpid SYS_wait4
#define NR_wait3 SYS_wait4
#define NR_wait4 SYS_wait4
#define NR_waitid SYS_waitid

/* A wait for a child that may block fires an armed start once the delay
 * has passed, before or after it (agent/core/arm.h: a subshell waits for its
 * pipeline). Signal handlers reap with WNOHANG, which never fires it. */
#define CHILD_WAIT(o) ((o) & WNOHANG ? ARM_NONE : ARM_LATE)

static void resolve(void);

/*
 * Per call: the real function (its stub until resolved), the route the
 * exported name jumps through, the stub that resolves every real function
 * on first use, the traced twin and the exported name.
 */
#define TWINS(ret, name, params, args, kind, obj, arm, arm_safe)               \
    static ret stub_##name params;                                             \
    static ret traced_##name params;                                           \
    static ret(*real_##name) params = stub_##name;                             \
    static ret(*route_##name) params = stub_##name;                            \
    static ret stub_##name params                                              \
    {                                                                          \
        resolve();                                                             \
        return route_##name args;                                              \
    }                                                                          \
    static __attribute__((noinline)) ret traced_##name params                  \
    {                                                                          \
        int64_t t0_ = trace_clock();                                           \
        ret rv_ = real_##name args;                                            \
        int saved_ = errno;                                                    \
        int k_ = (kind);                                                       \
        if (k_ == FD)                                                          \
            k_ = fd_kind((int)(obj));                                          \
        errno = saved_;                                                        \
        if (__atomic_load_n(&trace_on, __ATOMIC_RELAXED))                      \
            trace_interval(k_, (uint64_t)(obj), t0_, 0);                       \
        return rv_;                                                            \
    }                                                                          \
    static __attribute__((noinline)) ret armed_##name params                   \
    {                                                                          \
        arm_door(arm, arm_safe);                                               \
        ret rv_ = (__atomic_load_n(&trace_on, __ATOMIC_RELAXED)                \
                       ? traced_##name                                         \
                       : real_##name)args;                                     \
        arm_door(arm, arm_safe); /* a late kind, after a long wait */          \
        return rv_;                                                            \
    }                                                                          \
    /* Noting where it blocks (agent/threads/blocked.h), then as routed without. */  \
    static __attribute__((noinline)) ret noted_##name params                   \
    {                                                                          \
        int n_ = blocked_enter(NR_##name, (uintptr_t)real_##name,              \
                               __builtin_frame_address(0));                    \
        ret rv_ = (__atomic_load_n(&arm_armed, __ATOMIC_ACQUIRE) == 1          \
                       ? armed_##name                                          \
                   : __atomic_load_n(&trace_on, __ATOMIC_RELAXED)              \
                       ? traced_##name                                         \
                       : real_##name)args;                                     \
        BLOCKED_LEAVE(n_);                                                     \
        return rv_;                                                            \
    }
#define DECLARE(ret, name, params, args, kind, obj, arm, arm_safe)             \
    TWINS(ret, name, params, args, kind, obj, arm, arm_safe)                   \
    EXPORT FAST COMMON_PATH ret name params                                    \
    {                                                                          \
        return route_##name args;                                              \
    }

/* A hook is a jump: no frame to build or walk. */
#define FAST __attribute__((optimize("omit-frame-pointer")))

CALL_HOOKS(DECLARE)
CHILD_HOOKS(TWINS)

void (*trace_child_waited)(void);

/* After a wait that reported a child: the process layer's step, errno
 * kept (it makes no call). */
static void child_waited(void)
{
    void (*step)(void) = __atomic_load_n(&trace_child_waited, __ATOMIC_ACQUIRE);
    if (step)
        step();
}

EXPORT pid_t wait(int *st)
{
    pid_t rv = route_wait(st);
    if (rv > 0)
        child_waited();
    return rv;
}

EXPORT pid_t waitpid(pid_t p, int *st, int o)
{
    pid_t rv = route_waitpid(p, st, o);
    if (rv > 0)
        child_waited();
    return rv;
}

EXPORT pid_t wait3(int *st, int o, struct rusage *u)
{
    pid_t rv = route_wait3(st, o, u);
    if (rv > 0)
        child_waited();
    return rv;
}

EXPORT pid_t wait4(pid_t p, int *st, int o, struct rusage *u)
{
    pid_t rv = route_wait4(p, st, o, u);
    if (rv > 0)
        child_waited();
    return rv;
}

EXPORT int waitid(idtype_t t, id_t i, siginfo_t *in, int o)
{
    int rv = route_waitid(t, i, in, o);
    if (rv == 0 && in && in->si_pid > 0)
        child_waited();
    return rv;
}

#define RESOLVE(ret, name, params, args, kind, obj, arm, arm_safe)             \
    do {                                                                       \
        void *p_ = next_symbol(#name);                                         \
        if (p_)                                                                \
            __atomic_store_n((void **)&real_##name, p_, __ATOMIC_RELEASE);     \
    } while (0);

#define ROUTE(ret, name, params, args, kind, obj, arm, arm_safe)               \
    if (real_##name != stub_##name) {                                          \
        __typeof__(route_##name) to = noted   ? noted_##name                   \
                                      : armed ? armed_##name                   \
                                      : on    ? traced_##name                  \
                                              : real_##name;                   \
        /* Stored only when it changes (agent/fork_step.h). */                 \
        if (__atomic_load_n(&route_##name, __ATOMIC_RELAXED) != to)            \
            __atomic_store_n(&route_##name, to, __ATOMIC_RELEASE);             \
    }

static int (*real_setname)(pthread_t, const char *);

/* on: a trace runs; while the start is armed (agent/core/arm.h) every call
 * passes its armed twin first. */
FORK_PATH static void trace_hooks_route(int on)
{
    int armed = __atomic_load_n(&arm_armed, __ATOMIC_ACQUIRE) == 1; /* not taken */
    int noted = __atomic_load_n(&blocked_notes_on, __ATOMIC_ACQUIRE);
    TRACE_HOOKS(ROUTE)
}

static int resolved;

/* Every real function at once, then the routes as the trace stands.
 * Async-signal-safe (next_symbol answers the C library's names from its
 * hash tables): a stub may run first in a signal handler. */
STARTUP static void resolve(void)
{
    TRACE_HOOKS(RESOLVE)
    if (!real_setname)
        real_setname = next_symbol("pthread_setname_np");
    __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
    trace_hooks_route(__atomic_load_n(&trace_on, __ATOMIC_ACQUIRE));
}

static void trace_hooks_switch(int on)
{
    if (!__atomic_load_n(&resolved, __ATOMIC_ACQUIRE))
        resolve();
    trace_hooks_route(on);
}

/* Nothing is looked up here: the first call of any hook resolves them
 * all (its stub), or the start of a trace does, so a process that calls
 * none of them (most short-lived ones) looks up none. */
/* The start was armed or disarmed: the routes follow, once resolved
 * (until then the stubs route at their first call). */
FORK_PATH static void trace_hooks_arm(int armed)
{
    (void)armed;
    if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE))
        trace_hooks_route(__atomic_load_n(&trace_on, __ATOMIC_ACQUIRE));
}

/* Noting began (agent/threads/blocked.h): every call passes its noted twin. */
static void trace_hooks_noted(void)
{
    trace_hooks_arm(0);
}

__attribute__((constructor(103))) static void trace_hooks_init(void)
{
    trace_route = trace_hooks_switch;
    arm_reroute = trace_hooks_arm;
    __atomic_store_n(&blocked_notes_reroute, trace_hooks_noted,
                     __ATOMIC_RELEASE);
}

/* ---- what a descriptor is ------------------------------------------------ */

#define FD_CACHE 4096
/* Per descriptor: the trace it was looked up in (its start time's bits)
 * and whether it is a socket in the low bit. */
static uint32_t fd_cache[FD_CACHE];

static int fd_kind(int fd)
{
    uint32_t stamp = (uint32_t)(trace_started_ns >> 8) & ~1u;
    if (fd >= 0 && fd < FD_CACHE) {
        uint32_t c = __atomic_load_n(&fd_cache[fd], __ATOMIC_RELAXED);
        if ((c & ~1u) == stamp)
            return c & 1 ? TRACE_NET : TRACE_SYSCALL;
    }
    struct stat st;
    int sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
    if (fd >= 0 && fd < FD_CACHE)
        __atomic_store_n(&fd_cache[fd], stamp | (uint32_t)sock,
                         __ATOMIC_RELAXED);
    return sock ? TRACE_NET : TRACE_SYSCALL;
}

/* glibc's names of pread and pwrite for 64-bit offsets: the same calls. */
EXPORT FAST ssize_t pread64(int fd, void *b, size_t n, off_t o)
{
    return route_pread(fd, b, n, o);
}

EXPORT FAST ssize_t pwrite64(int fd, const void *b, size_t n, off_t o)
{
    return route_pwrite(fd, b, n, o);
}

EXPORT int pthread_setname_np(pthread_t t, const char *name)
{
    if (!real_setname)
        resolve();
    int r = real_setname ? real_setname(t, name) : ENOSYS;
    if (unlikely(trace_on) && r == 0 && pthread_equal(t, pthread_self()))
        trace_instant(TRACE_RENAME, 0, 0, name, strnlen(name, 15));
    return r;
}
