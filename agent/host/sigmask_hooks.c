/*
 * Interposers of pthread_sigmask and sigprocmask: a host thread that blocks
 * the agent's signals must never find one of them among its blocked
 * signals (it may read those with signalfd or sigwait). See agent/host/sigmask.c
 * for the protocol with the agent's senders.
 *
 * Entered on host threads, possibly from their signal handlers (both calls
 * are async-signal-safe). While the agent sends nothing (no profile, no
 * dump under way) a call costs two atomic operations on top of the real
 * one. While it does, the change is made under sigmask_lock with every
 * signal held off (change_watched): a mask that blocks the profiling signal
 * disarms the thread's timer, one that unblocks it re-arms it; whatever of
 * the agent's is pending on the thread and blocked by the new mask is
 * dequeued (a signal of the host's found there is queued back). The host
 * gets the mask, the old mask and the return value the C library gives.
 *
 * Not covered (the C library changes the mask itself, out of reach of an
 * interposer): siglongjmp and setcontext restoring a saved mask, the
 * obsolete sigblock/sigsetmask/sighold, and raw rt_sigprocmask system
 * calls. A thread left blocked that way keeps its timer until an
 * interposed change unblocks the signal and blocks it again. The same
 * holds for the mask the kernel sets for a signal handler (sa_mask): a
 * change made in the handler that leaves the profiling signal blocked
 * (OpenJDK's handlers unblock the error signals at their start, under a
 * mask that blocks every other one) touches no sampler, since the
 * kernel's return from the handler restores the mask unseen; one that
 * unblocks it finds the sampler running and leaves it so.
 */
#include "agent/compiler.h"
#include "agent/cpu/cpu.h"
#include "agent/guard.h"
#include "agent/core/next_symbol.h"
#include "agent/host/proc.h"
#include "agent/host/sigmask.h"
#include "agent/spinlock.h"
#include "agent/host/signals.h"
#include "agent/threads/threads.h"
#include "agent/wall/wall.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*mask_fn)(int, const sigset_t *, sigset_t *);

static mask_fn real_sigprocmask;

/* Pending signals of the agent's dequeued, of the host's put back. */
static long sigmask_discarded;

__attribute__((constructor(101))) static void resolve(void)
{
    if (!real_sigprocmask)
        real_sigprocmask = (mask_fn)next_symbol("sigprocmask");
}

/* 1 when si is one of the agent's own signals: a CPU or wall timer's
 * expiry, a CPU perf event's overflow or a threads dump's question. */
static int agent_sent(const siginfo_t *si)
{
    return signals_sender(si) != SIGNALS_HOST;
}

/*
 * Dequeues the agent's instances of sig pending on this thread itself (the
 * process-wide queue is never touched: a thread's own queue is dequeued
 * first, and /proc tells whether it still holds sig). The host's own ones
 * found on the way are queued back to this thread, in their order. Called
 * with sig blocked. Not a cancellation point (raw system calls).
 */
static void discard_pending(int sig)
{
    sigset_t pending;
    if (sigpending(&pending) != 0 || sigismember(&pending, sig) != 1)
        return;
    int tid = (int)syscall(SYS_gettid);
    siginfo_t keep[8];
    int nkeep = 0;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    for (int i = 0; i < 64 && sigmask_thread_pending(tid, sig); i++) {
        siginfo_t si;
        struct timespec zero = {0, 0};
        if (syscall(SYS_rt_sigtimedwait, &one, &si, &zero, 8) != sig)
            break;
        if (si.si_code == POLL_IN && agent_sent(&si)) {
            /* A perf event's overflow: its period goes to the thread's
             * next sample (cpu_signal.c). */
            cpu_periods_owed++;
            __atomic_fetch_add(&sigmask_discarded, 1, __ATOMIC_RELAXED);
        } else if (agent_sent(&si))
            __atomic_fetch_add(&sigmask_discarded, 1, __ATOMIC_RELAXED);
        else if (nkeep < 8)
            keep[nkeep++] = si;
    }
    for (int i = 0; i < nkeep; i++)
        syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, sig, &keep[i]);
}

/* The mask (how, set) makes of cur, as the C library would set it. */
static int apply(int how, const sigset_t *set, const sigset_t *cur,
                 sigset_t *out)
{
    switch (how) {
    case SIG_BLOCK: sigorset(out, cur, set); return 0;
    case SIG_SETMASK: *out = *set; return 0;
    case SIG_UNBLOCK: {
        sigset_t keep;
        sigfillset(&keep);
        for (int sig = 1; sig < NSIG; sig++)
            if (sigismember(set, sig) == 1)
                sigdelset(&keep, sig);
        sigandset(out, cur, &keep);
        return 0;
    }
    default: return -1;
    }
}

/*
 * The watched path. Every signal is held off for its length (a host
 * handler that longjmp'ed out of it would leave sigmask_lock held and the
 * guard entered): the mask it began with is kept, the lock taken, the
 * timer disarmed if the profiling signal becomes blocked, the agent's
 * signals that the new mask blocks dequeued, the timer re-armed if the
 * profiling signal becomes unblocked, the lock released, and only then
 * the host's new mask set (a signal it unblocks is delivered there, with
 * the lock free).
 */
static __attribute__((noinline)) int change_watched(mask_fn real, int how,
                                                    const sigset_t *set,
                                                    sigset_t *old)
{
    sigset_t all, cur, next;
    sigfillset(&all);
    int saved = errno;
    if (sigmask_real(SIG_BLOCK, &all, &cur) != 0 ||
        apply(how, set, &cur, &next) != 0) {
        /* Not a change the agent can follow (a bad `how`): the real call
         * gives the host its answer, from the mask it had. */
        sigmask_real(SIG_SETMASK, &cur, NULL);
        errno = saved;
        return real(how, set, old);
    }
    guard_enter();
    spin_lock(&sigmask_lock);
    int cpu = __atomic_load_n(&cpu_active, __ATOMIC_SEQ_CST) ? cpu_signo : 0;
    int dump = threads_signo;
    int cpu_blocks = cpu && sigismember(&next, cpu) == 1;
    int cpu_blocked = cpu && sigismember(&cur, cpu) == 1;
    if (cpu_blocks && !cpu_blocked) {
        /* Only when this change blocks it. Blocked already, the sampler
         * was paused then, or the signal was blocked where no interposer
         * sees (a signal handler's own mask, which the kernel's return
         * from the handler lifts unseen): a sampler paused there would
         * stay paused, and what is pending is delivered when the mask
         * lifts. See the comment at the top. */
        cpu_thread_pause();
        discard_pending(cpu);
    }
    if (dump && dump != cpu && sigismember(&next, dump) == 1)
        discard_pending(dump);
    /* The wall profile's timer: disarmed before the signal is blocked
     * (wall_timer.c), and the blocked state remembered for its arming.
     * Only a change that blocks or unblocks it counts, as for the CPU
     * sampler above: blocked already (a handler's own mask, lifted
     * unseen at its return), the thread would stay marked as blocking
     * it, with no stack, until its mask is read again a second later.
     * A change that leaves it unblocked says so (a look from outside, in
     * this window where every signal is blocked, took it for blocked). */
    int wall = __atomic_load_n(&wall_active, __ATOMIC_SEQ_CST) ? wall_signo : 0;
    if (wall) {
        int wall_blocks = sigismember(&next, wall) == 1;
        int wall_blocked = sigismember(&cur, wall) == 1;
        if (wall_blocks != wall_blocked || !wall_blocks)
            wall_thread_mask(wall_blocks);
        if (wall_blocks && !wall_blocked)
            discard_pending(wall);
    }
    if (cpu_blocked && !cpu_blocks)
        cpu_thread_resume();
    else if (cpu && !cpu_blocks)
        cpu_thread_open();
    /* Chrooted: the threads book says the new mask from now on. */
    if (unlikely(__atomic_load_n(&proc_book_on, __ATOMIC_RELAXED)))
        proc_book_note_self(&next);
    spin_unlock(&sigmask_lock);
    guard_leave();
    errno = saved;
    if (old)
        *old = cur;
    return real(SIG_SETMASK, &next, NULL);
}

/* Chrooted: the mask this thread has now goes to the threads book, while
 * the change still counts as in flight (errno kept). */
static __attribute__((noinline)) void note_in_book(void)
{
    int saved = errno;
    sigset_t now;
    if (sigmask_real(SIG_BLOCK, NULL, &now) == 0)
        proc_book_note_self(&now);
    errno = saved;
}

static inline int change(mask_fn real, int how, const sigset_t *set,
                         sigset_t *old)
{
    if (!set || guard_active())
        return real(how, set, old);
    __atomic_fetch_add(&sigmask_changing, 1, __ATOMIC_SEQ_CST);
    if (likely(!__atomic_load_n(&sigmask_watched, __ATOMIC_SEQ_CST))) {
        int r = real(how, set, old);
        if (unlikely(__atomic_load_n(&proc_book_on, __ATOMIC_RELAXED)))
            note_in_book();
        __atomic_fetch_sub(&sigmask_changing, 1, __ATOMIC_SEQ_CST);
        return r;
    }
    __atomic_fetch_sub(&sigmask_changing, 1, __ATOMIC_SEQ_CST);
    return change_watched(real, how, set, old);
}

EXPORT COMMON_PATH int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    return change(sigmask_real, how, set, old);
}

EXPORT COMMON_PATH int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    if (unlikely(!real_sigprocmask)) {
        resolve();
        if (!real_sigprocmask) {
            errno = ENOSYS;
            return -1;
        }
    }
    return change(real_sigprocmask, how, set, old);
}
