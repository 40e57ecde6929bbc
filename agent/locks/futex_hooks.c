/*
 * The interposer of the C library's syscall() function, for the locks,
 * condition variables, thread parkers and one-time initializations that
 * programs build on the futex system call themselves (Rust's std,
 * parking_lot, abseil, folly, C++20 atomic waits, hand-written C) and that
 * never enter pthread_mutex_lock. The C library's own primitives issue
 * their futex calls inline, never through the exported syscall(): they are
 * seen by agent/locks/lock_hooks.c only, never counted twice.
 *
 * Entered on every host thread for every syscall() call, and possibly from
 * the host's signal handlers: every number but SYS_futex and
 * SYS_futex_waitv is forwarded at once (SYS_seccomp and SYS_prctl's
 * PR_SET_SECCOMP note whether the host sandboxed itself: agent_sandboxed),
 * with nothing touched but the argument registers (async-signal-safe on
 * that path). Futex calls:
 *   waits (FUTEX_WAIT, FUTEX_WAIT_BITSET, FUTEX_LOCK_PI, FUTEX_LOCK_PI2,
 *     FUTEX_WAIT_REQUEUE_PI, futex_waitv) are timed around the real call
 *     and reach the block profile with the waiter's stack; one in
 *     PPROF_MUTEX_FRACTION registers on its address (contention.c's
 *     per-lock records) so that the thread that wakes it is charged.
 *   wakes (FUTEX_WAKE, FUTEX_WAKE_BITSET, FUTEX_WAKE_OP, FUTEX_UNLOCK_PI,
 *     the requeues) read one global (is any sampled futex waiter
 *     registered?) and forward; when there is one, the waker takes the
 *     delay its address's waiters accrued, after the real call.
 * docs/contention.md explains the attribution and where it is approximate.
 * In a process that is not dumpable, a call that may wait long (futex
 * waits, io_getevents, io_uring_enter, epoll and poll waits, reads, ...)
 * is noted while it waits (agent/threads/blocked.h): a few stores, signal-safe.
 *
 * Never changes what the host sees: the same return value and errno, the
 * same blocking; the agent's own threads and calls made with the guard
 * entered are only forwarded.
 */
#include "agent/threads/blocked.h"
#include "agent/compiler.h"
#include "agent/locks/contention.h"
#include "agent/locks/deadlock.h"
#include "agent/guard.h"
#include "agent/core/next_symbol.h"
#include "agent/trace/trace.h"

#include <errno.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX_LOCK_PI2
#define FUTEX_LOCK_PI2 13
#endif

#define EXPORT __attribute__((visibility("default")))

typedef long (*syscall_fn)(long, ...);

static long stub_syscall(long nr, ...);
/* Starts at a stub (so the hot path never tests for NULL); set once by
 * futex_hooks_init(), from the constructor. */
static syscall_fn real_syscall = stub_syscall;

/* The system call itself, as the C library's syscall() makes it: what the
 * stub does before resolution (a constructor of another library, or a
 * signal handler, may call syscall() before ours ran: no dlsym there on
 * x86-64; elsewhere the stub has to look the next definition up). */
static long raw_syscall(long nr, long a1, long a2, long a3, long a4, long a5,
                        long a6)
{
#if defined(__x86_64__)
    long r;
    register long r10 __asm__("r10") = a4;
    register long r8 __asm__("r8") = a5;
    register long r9 __asm__("r9") = a6;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8),
                       "r"(r9)
                     : "rcx", "r11", "memory");
    if ((unsigned long)r > -4096UL) {
        errno = (int)-r;
        return -1;
    }
    return r;
#else
    syscall_fn fn = (syscall_fn)next_symbol("syscall");
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    return fn(nr, a1, a2, a3, a4, a5, a6);
#endif
}

/* The six arguments syscall(nr, ...) may carry: a caller passes as many as
 * its call needs, the kernel reads six registers. */
struct sys_args {
    long a[6];
};

static struct sys_args take_args(va_list ap)
{
    struct sys_args r;
    for (int i = 0; i < 6; i++)
        r.a[i] = va_arg(ap, long);
    return r;
}

/* In a variadic function whose last named argument is nr: the six longs
 * after it, into x. */
#define TAKE_ARGS(x, nr)                                                       \
    do {                                                                       \
        va_list ap_;                                                           \
        va_start(ap_, nr);                                                     \
        (x) = take_args(ap_);                                                  \
        va_end(ap_);                                                           \
    } while (0)
#define ARGS6(x) (x).a[0], (x).a[1], (x).a[2], (x).a[3], (x).a[4], (x).a[5]

static long stub_syscall(long nr, ...)
{
    struct sys_args x;
    TAKE_ARGS(x, nr);
    return raw_syscall(nr, ARGS6(x));
}

STARTUP void futex_hooks_init(void)
{
    if (real_syscall != stub_syscall)
        return;
    guard_enter_lookup();
    syscall_fn fn = (syscall_fn)next_symbol("syscall");
    if (fn)
        __atomic_store_n(&real_syscall, fn, __ATOMIC_RELEASE);
    guard_leave_lookup();
}

/* 1 when this futex call must only be forwarded. */
static inline int pass_through(void)
{
    return unlikely(!__atomic_load_n(&contention_on, __ATOMIC_RELAXED) ||
                    guard_active());
}

/* ---- waits ---------------------------------------------------------------- */

/*
 * A futex wait: timed for the block profile and, when sampled for the mutex
 * profile, registered on uaddr (NULL for futex_waitv, whose waker may be
 * any of several addresses: block only). A wait that did not block (the
 * word had already changed: EAGAIN) is not a wait.
 */
/* Longer than a futex call that finds the word changed and returns at once
 * (about a microsecond), shorter than any sleep worth a profile's time. */
#define FUTEX_SLEPT_NS 20000

static __attribute__((noinline)) long wait_slow(const void *uaddr, long nr,
                                                long a1, long a2, long a3,
                                                long a4, long a5, long a6)
{
    int saved = errno;
    int64_t t0 = contention_clock();
    void *h = uaddr ? contention_futex_arrive(uaddr, t0) : NULL;
    /* Noted for the deadlock look; a PI futex word names its owner. */
    int cmd = (int)a2 & FUTEX_CMD_MASK;
    struct deadlock_slot *dl =
        uaddr ? deadlock_wait_begin(uaddr,
                                    cmd == FUTEX_LOCK_PI || cmd == FUTEX_LOCK_PI2
                                        ? DEADLOCK_FUTEX_PI
                                        : DEADLOCK_FUTEX,
                                    t0)
              : NULL;
    errno = saved;
    long r = real_syscall(nr, a1, a2, a3, a4, a5, a6);
    deadlock_wait_end(dl);
    saved = errno;
    int64_t t1 = contention_clock();
    if (h)
        contention_futex_leave(h, t1);
    /* EAGAIN is a wait that never slept (the word had changed) unless it
     * took long: a wait interrupted by a signal handler is restarted by
     * the kernel, which checks the word again and answers EAGAIN when the
     * holder let go meanwhile, after the whole sleep. Dropping those lost
     * whole 12 ms rounds in contention_futex (15 of 20 seen). */
    if (r >= 0 || saved != EAGAIN || t1 - t0 >= FUTEX_SLEPT_NS) {
        contention_block_event(t1 - t0);
        if (unlikely(trace_on))
            trace_interval(TRACE_SYNC, (uint64_t)uaddr, t0, 0);
    }
    errno = saved;
    return r;
}

/* ---- wakes ---------------------------------------------------------------- */

/*
 * A wake while sampled futex waiters exist somewhere: after the real call
 * (nothing added to the waker's critical section, if it is one), the waker
 * is charged what uaddr's waiters accrued since the last charge, as an
 * unlock is (contention_charge()). t was read just before the real call.
 */
static __attribute__((noinline)) long wake_slow(const void *uaddr, long nr,
                                                long a1, long a2, long a3,
                                                long a4, long a5, long a6)
{
    uint64_t t = contention_stamp();
    long r = real_syscall(nr, a1, a2, a3, a4, a5, a6);
    if (pass_through())
        return r;
    int saved = errno;
    int64_t delay, count;
    if (contention_charge(uaddr, t, &delay, &count))
        contention_mutex_event_key(delay, count, CONTENTION_KEY_FUTEX_WAKE);
    errno = saved;
    return r;
}

static long futex(long a1, long a2, long a3, long a4, long a5, long a6)
{
    const void *uaddr = (const void *)a1;
    switch ((int)a2 & FUTEX_CMD_MASK) {
    case FUTEX_WAIT:
    case FUTEX_WAIT_BITSET:
    case FUTEX_LOCK_PI:
    case FUTEX_LOCK_PI2:
    case FUTEX_WAIT_REQUEUE_PI:
        if (pass_through())
            break;
        return wait_slow(uaddr, SYS_futex, a1, a2, a3, a4, a5, a6);
    case FUTEX_WAKE:
    case FUTEX_WAKE_BITSET:
    case FUTEX_WAKE_OP:
    case FUTEX_UNLOCK_PI:
    case FUTEX_REQUEUE:
    case FUTEX_CMP_REQUEUE:
    case FUTEX_CMP_REQUEUE_PI:
        if (likely(__atomic_load_n(&contention_futex_waiters,
                                   __ATOMIC_RELAXED) == 0 ||
                   !contention_followed(uaddr)))
            break;
        return wake_slow(uaddr, SYS_futex, a1, a2, a3, a4, a5, a6);
    default:
        break;
    }
    return real_syscall(SYS_futex, a1, a2, a3, a4, a5, a6);
}

/* 1 for a call that may install a system-call filter: seccomp's strict
 * mode or a filter (not its queries), prctl(PR_SET_SECCOMP). */
static inline int installs_filter(long nr, long a1)
{
    if (nr == SYS_seccomp)
        return a1 == SECCOMP_SET_MODE_STRICT || a1 == SECCOMP_SET_MODE_FILTER;
    return a1 == PR_SET_SECCOMP;
}

/* A call that may install a filter: the agent makes no optional system
 * call from before it until it failed, or from then on when it installed
 * one (agent/guard.h). Success is 0, or a descriptor (>= 0) for a filter
 * with a listener. Async-signal-safe; errno is the call's. */
__attribute__((noinline, cold)) static long
filter_call(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    sandbox_attempt_begin();
    long ret = real_syscall(nr, a1, a2, a3, a4, a5, a6);
    int saved = errno;
    int listener = nr == SYS_seccomp && a1 == SECCOMP_SET_MODE_FILTER &&
                   (a2 & SECCOMP_FILTER_FLAG_NEW_LISTENER);
    sandbox_attempt_end(listener ? ret >= 0 : ret == 0);
    errno = saved;
    return ret;
}

/* 1 for a call that may wait long: noted while it waits in a process
 * that is not dumpable (agent/threads/blocked.h). */
static int may_wait(long nr, long a2)
{
    switch (nr) {
    case SYS_futex:
        switch ((int)a2 & FUTEX_CMD_MASK) {
        case FUTEX_WAIT: case FUTEX_WAIT_BITSET: case FUTEX_LOCK_PI:
        case FUTEX_LOCK_PI2: case FUTEX_WAIT_REQUEUE_PI:
            return 1;
        default:
            return 0;
        }
    case SYS_futex_waitv: case SYS_io_getevents: case SYS_io_pgetevents:
    case SYS_io_uring_enter: case SYS_epoll_wait: case SYS_epoll_pwait:
    case SYS_epoll_pwait2: case SYS_poll: case SYS_ppoll: case SYS_select:
    case SYS_pselect6: case SYS_read: case SYS_readv: case SYS_recvfrom:
    case SYS_recvmsg: case SYS_accept: case SYS_accept4:
    case SYS_nanosleep: case SYS_clock_nanosleep: case SYS_rt_sigtimedwait:
    case SYS_wait4: case SYS_waitid: case SYS_msgrcv: case SYS_semtimedop:
        return 1;
    default:
        return 0;
    }
}

static long dispatch_call(long nr, long a1, long a2, long a3, long a4,
                          long a5, long a6);

/* A waiting call, noted while it waits. Async-signal-safe. */
static __attribute__((noinline)) long
noted_call(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    int n = blocked_enter(nr, (uintptr_t)real_syscall,
                          __builtin_frame_address(0));
    long r = dispatch_call(nr, a1, a2, a3, a4, a5, a6);
    BLOCKED_LEAVE(n);
    return r;
}

static inline long dispatch(long nr, long a1, long a2, long a3, long a4,
                            long a5, long a6)
{
    if (unlikely(__atomic_load_n(&blocked_notes_on, __ATOMIC_RELAXED)) &&
        may_wait(nr, a2))
        return noted_call(nr, a1, a2, a3, a4, a5, a6);
    return dispatch_call(nr, a1, a2, a3, a4, a5, a6);
}

/* The system call nr with its six arguments: a futex call is followed, a
 * futex_waitv timed, anything else forwarded as it is. */
static inline __attribute__((always_inline)) long
dispatch_call(long nr, long a1, long a2, long a3, long a4, long a5, long a6)
{
    if (unlikely(nr == SYS_futex))
        return futex(a1, a2, a3, a4, a5, a6);
    if (unlikely(nr == SYS_futex_waitv) && !pass_through())
        return wait_slow(NULL, nr, a1, a2, a3, a4, a5, a6);
    if (unlikely(nr == SYS_seccomp || nr == SYS_prctl) &&
        installs_filter(nr, a1))
        return filter_call(nr, a1, a2, a3, a4, a5, a6);
    return real_syscall(nr, a1, a2, a3, a4, a5, a6);
}

/*
 * The C library declares syscall() variadic and, on x86-64, reads the
 * number and six arguments from the registers and the first stack slot
 * whatever the caller passed (its callers pass longs, or narrower integers
 * and pointers in the same registers). Defined here with that fixed
 * signature (under the assembler name syscall, as the C name would clash
 * with the variadic declaration), the forward to the next definition is a
 * plain call: va_arg spilled every register and cost 33 instructions per
 * call, this costs a handful (docs/contention.md). Not a jump: a sibling
 * call would store the sixth argument back into the slot it came from,
 * which belongs to the caller's frame when it passed fewer (the value read
 * is the value written, but a store into a frame we do not own is not
 * ours to make). Elsewhere, the variadic form.
 */
#if defined(__x86_64__)
long futex_hooks_syscall(long nr, long a1, long a2, long a3, long a4,
                         long a5, long a6) __asm__("syscall");

EXPORT __attribute__((optimize("no-optimize-sibling-calls"))) long
futex_hooks_syscall(long nr, long a1, long a2, long a3, long a4, long a5,
                    long a6)
{
    return dispatch(nr, a1, a2, a3, a4, a5, a6);
}
#else
EXPORT long syscall(long nr, ...)
{
    struct sys_args x;
    TAKE_ARGS(x, nr);
    return dispatch(nr, ARGS6(x));
}
#endif
