/* Borrowed signals and per-thread CPU timers (host/signals.c). */

#ifndef PPROF_AGENT_SIGNALS_H
#define PPROF_AGENT_SIGNALS_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

/* Installs handler (SA_SIGINFO | SA_RESTART, blocking mask while it runs;
 * NULL: nothing more) on the first signal from first to last (either way
 * round, skipping skip; 0: none) that the host leaves at its default
 * action; the action it had goes to *saved. Returns the signal or -EAGAIN.
 * Not async-signal-safe. */
int signals_borrow(int first, int last, int skip,
                   void (*handler)(int, siginfo_t *, void *),
                   const sigset_t *mask, struct sigaction *saved);

/* Gives sig back as saved, unless the host has replaced handler meanwhile;
 * what is still pending of it is discarded first. Not async-signal-safe. */
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
