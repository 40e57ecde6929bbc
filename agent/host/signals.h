/*
 * The signal protocol: which signals the agent borrows, how its own
 * deliveries are told from the host's, and what becomes of the host's
 * (host/signals.c takes and gives back, host/signals_forward.c forwards).
 *
 * A signal is borrowed only while a profile or a dump needs it. The first
 * choice is one the host leaves at its default action; when there is none
 * (a Go program handles SIGPROF and every real-time signal, the JVM many),
 * the agent chains: its handler goes in front of the host's, with the
 * host's flags (SA_ONSTACK: Go runs every handler on its threads' signal
 * stacks, and a handler on a goroutine's small stack would overrun it) and
 * its mask, and hands every delivery that is not the agent's to the
 * handler that was there, as the host would have received it (the same
 * signal number, siginfo and context, on the same stack, with the same
 * signals blocked). Only a handler installed with SA_RESTART and without
 * SA_RESETHAND or SA_NODEFER is chained (Go's and the JVM's are): those
 * flags would change what the agent's own deliveries do to the host (an
 * EINTR, a one-shot handler spent, a handler re-entered), so with them the
 * host's behaviour could not be kept whole. The agent's own deliveries
 * carry a cookie in si_value that no other sender sets:
 *
 *   CPU timer      si_code SI_TIMER, si_value CPU_TIMER_COOKIE << 32 | tid
 *   wall timer     si_code SI_TIMER, si_value WALL_COOKIE << 48 | slot | tid
 *   threads dump   si_code SI_QUEUE from this process (rt_tgsigqueueinfo),
 *                  si_value THREADS_COOKIE << 48 | generation | slot
 *   CPU perf event si_code POLL_IN, si_fd one of the running CPU profile's
 *                  perf events (cpu_perf_is_ours below; the kernel's
 *                  F_SETSIG delivery of an event's overflow carries no
 *                  si_value, the descriptor is its mark)
 *
 * Perf events are used only on a SIGPROF the agent took from its default
 * (agent/cpu/cpu_perf.c), never on a chained signal, so no handler of the
 * host's is ever sent an overflow; and a host's own O_ASYNC delivery on a
 * chained signal (POLL_IN with a descriptor of the host's) is the host's
 * and forwarded like any other.
 * A timer of the host's on the same signal (Go's per-thread profiling
 * timers carry si_value 0), a kill or a sigqueue of the host's are the
 * host's and are forwarded. On a signal that was at its default action
 * nothing is forwarded: a stray delivery there is dropped rather than
 * allowed to end the process.
 */

#ifndef PPROF_AGENT_SIGNALS_H
#define PPROF_AGENT_SIGNALS_H

#include "agent/stacks/stack.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

/* The cookies of the agent's deliveries (see above). */
#define CPU_TIMER_COOKIE 0x7070726fULL
#define WALL_COOKIE 0x7761ULL
#define THREADS_COOKIE 0x7467ULL

/* A bit per descriptor number that is one of the running CPU profile's
 * perf events: defined and written by agent/cpu/cpu_perf.c (the slot
 * holder and the thread hooks, with atomics; set before an event is
 * enabled, cleared before it is closed), read by signals_sender in any
 * handler. The agent's events sit in its high descriptor range, below
 * CPU_PERF_FDS. */
#define CPU_PERF_FDS 65536
extern uint64_t cpu_perf_fds[CPU_PERF_FDS / 64];

/* 1 when fd is one of the running CPU profile's perf events.
 * Async-signal-safe. Does not allocate. */
static inline int cpu_perf_is_ours(int fd)
{
    return (unsigned)fd < CPU_PERF_FDS &&
           (__atomic_load_n(&cpu_perf_fds[fd / 64], __ATOMIC_ACQUIRE) >>
            (fd % 64)) & 1;
}

/* Who sent si: the agent's CPU profile (a timer's expiry or a perf
 * event's overflow: si_code tells them apart), its wall profile, its
 * threads dump, or the host (SIGNALS_HOST). Async-signal-safe. */
enum { SIGNALS_HOST, SIGNALS_CPU, SIGNALS_WALL, SIGNALS_THREADS };
static inline int signals_sender(const siginfo_t *si)
{
    uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    if (si->si_code == POLL_IN)
        return cpu_perf_is_ours(si->si_fd) ? SIGNALS_CPU : SIGNALS_HOST;
    if (si->si_code == SI_TIMER)
        return (v >> 32) == CPU_TIMER_COOKIE ? SIGNALS_CPU
               : (v >> 48) == WALL_COOKIE    ? SIGNALS_WALL
                                             : SIGNALS_HOST;
    if (si->si_code == SI_QUEUE && (v >> 48) == THREADS_COOKIE &&
        si->si_pid == getpid())
        return SIGNALS_THREADS;
    return SIGNALS_HOST;
}

/* Hands a delivery of sig that is not the agent's to the handler the
 * host had installed when the agent chained in front of it (SA_SIGINFO
 * or not); nothing when the agent took sig from its default action or
 * ignored state. The first thing an agent handler does with a delivery
 * that is not its own. Async-signal-safe. Does not allocate. */
void signals_forward(int sig, siginfo_t *si, void *uc);
/* An agent handler's whole body: a delivery from `who` (SIGNALS_CPU,
 * _WALL, _THREADS) is taken by take, run by stack_signal_run; any other
 * is the host's, forwarded. Async-signal-safe. */
static inline void signals_dispatch(int who,
                                    void (*take)(int, siginfo_t *, void *),
                                    int sig, siginfo_t *si, void *uc)
{
    if (signals_sender(si) != who) {
        signals_forward(sig, si, uc);
        return;
    }
    stack_signal_run(take, sig, si, uc);
}

/* What signals_forward hands sig to from now on: prev's handler (NULL:
 * nothing). Called by the borrower before its handler is installed; a
 * handler still running from an earlier borrow of sig reads either the old
 * or the new whole. Not async-signal-safe. */
void signals_forward_set(int sig, const struct sigaction *prev);

/* Installs handler on a signal and returns it, or -EAGAIN: prefer (0:
 * none) if the host leaves it at its default or ignores it; else the first
 * signal from first to last (either way round) left at its default; else
 * the first one there whose handler the agent can chain in front of (a
 * function of the host's, with SA_RESTART, without SA_RESETHAND or
 * SA_NODEFER). A signal
 * the agent holds for another purpose is never taken. The handler runs
 * with mask (NULL: none) blocked, plus, when chained, the host's mask and
 * flags. The action found goes to *saved; *chained (may be NULL) says
 * whether the agent chained. Not async-signal-safe. */
int signals_borrow(int first, int last, int prefer,
                   void (*handler)(int, siginfo_t *, void *),
                   const sigset_t *mask, struct sigaction *saved,
                   int *chained);

/* Installs handler on sig only when the host leaves sig at its default
 * action (an operator's signal, which is never taken from a host that
 * handles or ignores it): returns sig, also when handler holds it already
 * (a forked child's, *saved inherited); -EBUSY when the host handles or
 * ignores sig, -EAGAIN when another borrower of the agent's holds it.
 * The action found goes to *saved, for signals_give_back. Not
 * async-signal-safe. */
int signals_take_default(int sig, void (*handler)(int, siginfo_t *, void *),
                         struct sigaction *saved);

/* Gives sig back as saved, unless the host has replaced handler meanwhile;
 * when it was at its default, what is still pending of it is discarded
 * first (the host's own pending deliveries of a chained signal are kept:
 * they reach its handler). Not async-signal-safe. */
void signals_give_back(int sig, void (*handler)(int, siginfo_t *, void *),
                       const struct sigaction *saved);

/* Around fork, on the forking thread: block sig (a profile's timer signal)
 * until signals_fork_restore() puts back the mask the thread had before
 * the first such block. Not async-signal-safe. */
void signals_fork_block(int sig);
void signals_fork_restore(void);
/* In a fork child, whose profile is gone with its parent's threads and
 * timers: the host's disposition of sig back (saved when the agent
 * installed its handler, *installed), and the signal no longer taken
 * (*taken). Async-signal-safe. */
void signals_fork_child_reset(int sig, int *installed,
                              const struct sigaction *saved, int *taken);

/* Takes a profile's one session (*taken from 0 to 1): 0, or -EBUSY when a
 * session already holds it. Async-signal-safe. */
static inline int session_take(int *taken)
{
    int expected = 0;
    return __atomic_compare_exchange_n(taken, &expected, 1, 0,
                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)
               ? 0
               : -EBUSY;
}

/* Thread tid's CPU-time clock, for clock_gettime and timer_create: the
 * kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), which glibc only
 * gives for threads of its own (pthread_getcpuclockid). */
static inline clockid_t thread_cpu_clock(int tid)
{
    return (clockid_t)(((unsigned)~tid << 3) | 6);
}

/* A timer on thread tid's CPU clock that sends sig to tid with value in
 * si_value (the CPU and wall profiles' per-thread timers): the kernel
 * timer id, or -errno. Disarmed until thread_timer_set. */
int thread_timer_create(int tid, int sig, uint64_t value);
/* Arms a thread timer: first expiry after `first` ns of the thread's CPU
 * time, then every `period` ns (0, 0: disarmed). 0 or -errno. Both are
 * system calls only: async-signal-safe, no allocation. */
int thread_timer_set(int id, int64_t first, int64_t period);

#endif
