/*
 * The CPU profiler: per-thread samplers, task-clock perf events where the
 * system allows them (cpu_perf.c) or CPU-clock timers (cpu_timer.c, which
 * also runs the profile session), the signal
 * handler that turns each expiry into a stack (cpu_signal.c), the lock-free
 * sample buffer between the two worlds (cpu_ringbuf.c), and the cached
 * program headers that let libunwind run inside the handler without the
 * loader lock (phdr_cache.c, phdr_hooks.c).
 *
 * Contexts: the handler runs on any host thread at any instruction; the
 * thread start/exit hooks run on host threads; start, drain and stop run
 * on one HTTP worker at a time (cpu_profile_start() hands out a single
 * slot). See each file's opening comment for what it must never do.
 */
#ifndef PPROF_CPU_H
#define PPROF_CPU_H

#include "agent/host/signals.h"

#include <link.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Frames kept per CPU sample, as Go's maxCPUProfStack. Deeper stacks end
 * with FRAME_TRUNCATED. */
#define CPU_STACK_MAX 64

/* ---- sample buffer (cpu_ringbuf.c) --------------------------------------- */

/* One sample as the handler wrote it. */
struct cpu_sample {
    uint32_t tid;
    uint32_t weight; /* 1 + timer overruns: periods this sample stands for */
    uint32_t depth;
    uint32_t labels; /* the thread's label set id (agent/core/labels.h), 0: none */
    int64_t ns;      /* CLOCK_MONOTONIC when taken (the execution trace) */
    uintptr_t pcs[CPU_STACK_MAX]; /* leaf first; leaf exact, callers ra-1 */
};

/* Maps the buffer (once; kept for the next profile) and empties it.
 * Returns 0 or -ENOMEM. Call with no producer running.
 * Not async-signal-safe. */
int cpu_ringbuf_reset(void);

/* Claims a slot for a sample; NULL when the buffer is full (the caller
 * counts a loss). Fill it and publish it with cpu_ringbuf_commit().
 * Lock-free, many producers. Async-signal-safe. Does not allocate. */
struct cpu_sample *cpu_ringbuf_claim(void);
void cpu_ringbuf_commit(struct cpu_sample *s);

/* Calls fn on every committed sample in order, then frees their slots;
 * stops at the first slot still being written. Single consumer.
 * Not async-signal-safe. */
void cpu_ringbuf_drain(void (*fn)(const struct cpu_sample *s, void *arg),
                       void *arg);

/* ---- signal handler (cpu_signal.c) --------------------------------------- */

/* Histogram of the handler's own cost, for the median in the benchmark. */
#define CPU_HIST_BUCKETS 512
#define CPU_HIST_STEP_NS 100

/* Counters the handler keeps, read by the encoder. lost and dropped are
 * weights (periods), the others events. */
struct cpu_counters {
    uint64_t lost;        /* samples that could not be stored (buffer full) */
    uint64_t shallow;     /* leaf-only samples while a library unloaded */
    uint64_t handler_ns;  /* time spent in the timed handlers, summed */
    uint64_t handled;     /* handler invocations that took a stack */
    uint64_t settled;     /* periods settled when timers went away */
    uint64_t timed;       /* of those, the ones timed (1 in 16 a thread) */
    uint64_t hist[CPU_HIST_BUCKETS]; /* timed handlers, CPU_HIST_STEP_NS each */
};
extern struct cpu_counters cpu_counters;

/* Host threads that blocked the profiling signal when the running (or
 * last) CPU profile last looked: no timer, so nothing of theirs in it. */
int cpu_profile_unseen(void);

/* The value a timer of ours carries in si_value: CPU_TIMER_COOKIE
 * (signals.h) in the high bits, the thread id in the low 32. */

/* The handler, for sigaction (SA_SIGINFO). Async-signal-safe. */
void cpu_signal_handler(int sig, siginfo_t *si, void *uc);

/* 1 while this thread runs cpu_signal_handler: phdr_hooks.c then answers
 * dl_iterate_phdr from the cache. */
extern __thread int cpu_in_handler __attribute__((tls_model("initial-exec")));
/* Periods this thread's timer expiries stood for (1 + overrun each), counted
 * by the handler; the mask interposers' pause compares it with the periods
 * its CPU time went through (cpu_timer.c). */
extern __thread uint64_t cpu_periods_taken __attribute__((tls_model("initial-exec")));
/* Periods owed to this thread (expiries the kernel never delivered while
 * the signal was blocked), added to its next sample's weight. */
extern __thread uint32_t cpu_periods_owed __attribute__((tls_model("initial-exec")));

/* A thread's own account of its perf event's periods (cpu_signal.c's
 * perf_weight): valid while gen is cpu_profile_gen. Written by the handler
 * and, with the signal blocked, by cpu_timer.c's pause and resume on the
 * same thread. */
struct cpu_perf_self {
    int gen;
    uint32_t tid;
    int64_t anchor;    /* CPU time of the first overflow, plus pauses */
    uint64_t taken;    /* periods the samples so far stood for */
    int64_t paused_at; /* CPU time at the pause, -1: running */
    int by_clock;      /* weigh each overflow by the CPU clock */
};
extern __thread struct cpu_perf_self cpu_perf_self __attribute__((tls_model("initial-exec")));
/* Bumped by each profile's start: per-thread state of an older profile is
 * stale. */
extern int cpu_profile_gen;

/* Warms libunwind up outside any handler (per-thread caches, lazy init).
 * Not async-signal-safe. */
void cpu_signal_init(void);

/* ---- timers and the profile session (cpu_timer.c) ------------------------ */

/* 1 while a profile runs (read by hooks and the handler). */
extern int cpu_active;
/* The signal the running (or last) profile uses. */
extern int cpu_signo;
/* Period of the running profile, ns. */
extern int64_t cpu_period_ns;

/* Starts a profile at hz samples per CPU second per thread: installs the
 * handler, creates a timer on every host thread. Returns 0, -EBUSY when a
 * profile already runs, -EAGAIN when no signal is free for us, or -errno.
 * Not async-signal-safe. */
int cpu_profile_start(int hz);

/* Moves samples from the buffer into fn (call about once a second while
 * the profile runs, and it also picks up newly loaded objects).
 * Not async-signal-safe. */
void cpu_profile_drain(void (*fn)(const struct cpu_sample *s, void *arg),
                       void *arg);

/* Stops the profile: deletes every timer, restores the signal, drains the
 * last samples into fn. The slot stays taken until cpu_profile_release().
 * Not async-signal-safe. */
void cpu_profile_stop(void (*fn)(const struct cpu_sample *s, void *arg),
                      void *arg);

/* Name of thread tid during the last profile (live name from /proc, or
 * the name it had when it exited); writes "" when unknown.
 * Not async-signal-safe. */
void cpu_thread_name(int tid, char *out, size_t size);

/* Frees the registry and the profile slot. Not async-signal-safe. */
void cpu_profile_release(void);

/* ---- the sampler and its perf events (cpu_perf.c) ------------------------ */

/* The most events open at once (one per thread; the threads past it get
 * timers): the agent's high range holds 256 numbers
 * (docs/descriptors.md). The descriptors' bitmap and its check
 * (cpu_perf_fds, cpu_perf_is_ours) are in agent/host/signals.h, with the rest
 * of the signal protocol. */
#define CPU_PERF_MAX 128

/* The running (or last) profile's sampler: CPU_SAMPLER_PERF or
 * CPU_SAMPLER_TIMER (agent/config.h); cpu_perf_user_only when its events
 * leave kernel time out (perf_event_paranoid 2). */
extern int cpu_sampler;
extern int cpu_perf_user_only;
/* Chooses the profile's sampler (PPROF_CPU_SAMPLER, a probe on the calling
 * thread, the signal: see cpu_perf.c) after cpu_signo and cpu_period_ns
 * are set; clears the per-profile counts. Not async-signal-safe. */
void cpu_sampler_choose(void);
/* Which sampler and why, in words ("perf task-clock", "timer (...)").
 * Not async-signal-safe. */
const char *cpu_sampler_why(void);
/* Threads of the running (or last) profile sampled by a perf event, by a
 * timer. Not async-signal-safe. */
void cpu_sampler_counts(int *perf, int *timer);
void cpu_sampler_count_timer(void);
/* Opens, arms and enables a task-clock event on thread tid that
 * overflows every cpu_period_ns of its CPU time, the first one a whole
 * period after now, and sends cpu_signo to it. The descriptor is registered as held in *holder (-1 on failure).
 * Returns it or -errno (-ENOTSUP: the profile uses timers; -EMFILE: no
 * event or high descriptor left for it; -ESRCH: the thread is gone).
 * Not async-signal-safe. */
int cpu_perf_open(int tid, int *holder);
/* Closes the event in *holder (if any) and sets it to -1.
 * Not async-signal-safe. */
void cpu_perf_close(int *holder);
/* Stops and restarts an event's count; its period's phase is kept.
 * Not async-signal-safe. */
void cpu_perf_pause(int fd);
void cpu_perf_resume(int fd);
/* Fork child: closes the child's copy of an event of the parent's. */
void cpu_perf_fork_child(int *holder);

/* ---- one profile, two readers (cpu_share.c) ------------------------------ */

typedef void (*cpu_sample_fn)(const struct cpu_sample *s, void *arg);
/* The owner lets one guest in (the push does; an HTTP request does not).
 * Not async-signal-safe. */
void cpu_profile_share(void);
/* Joins the running profile as its guest: the owner's drains give fn every
 * sample too, until cpu_profile_leave(arg) or the profile's stop. Only a
 * sharing owner's, unless any_owner. 0, or -EBUSY (no profile, a guest
 * already, an owner that does not share). Not async-signal-safe. */
int cpu_profile_join(cpu_sample_fn fn, void *arg, int any_owner);
/* 1 while the guest with arg is still fed. Not async-signal-safe. */
int cpu_profile_joined(const void *arg);
void cpu_profile_leave(const void *arg);
/* cpu_timer.c's drains and stop: through the guest too; the stop's end
 * sends the guest away. Not async-signal-safe. */
void cpu_share_drain(cpu_sample_fn fn, void *arg);
/* One sample made outside the buffer (cpu_timer.c's settlement) to fn
 * and the guest. Not async-signal-safe. */
void cpu_share_emit(cpu_sample_fn fn, void *arg, const struct cpu_sample *s);
void cpu_share_end(void);
/* Fork child: no owner's thread, no guest. */
void cpu_share_fork_child(void);

/* Thread lifecycle hooks, called by thread_hooks.c on host threads (never
 * on the agent's own). Not async-signal-safe. */
void cpu_thread_started(void);
/* start_fn: the thread's start routine, the frame its settled periods
 * (cpu_timer.c) are charged under. */
void cpu_thread_exiting(uintptr_t start_fn);
/* The calling host thread is about to block the profiling signal: its
 * timer stops (pause), or has just unblocked it: its timer runs again
 * (resume; a thread without one gets one). No-ops while no profile runs.
 * Called by the mask interposers with sigmask_lock held.
 * Not async-signal-safe. */
void cpu_thread_pause(void);
void cpu_thread_resume(void);
/* The calling host thread changed its mask and leaves the profiling
 * signal unblocked, as it had: a thread without a sampler gets one (a look
 * at its mask from outside may have found it blocked). Called as above. */
void cpu_thread_open(void);
/* Records the calling thread as one of the agent's (never sampled, not
 * listed as the host's); once however often called. Not async-signal-safe. */
void cpu_agent_thread(void);
/* Forgets the calling agent thread as it ends. Not async-signal-safe. */
void cpu_agent_thread_end(void);
/* 1 when tid is one of the agent's own threads. Async-signal-safe. */
int cpu_is_agent_tid(int tid);

/* Seeds the sampler and installs the signal side. Not async-signal-safe. */
void cpu_timer_init(void);
/* Fork (agent/fork.c): prepare blocks the profiling signal in the
 * forking thread, so a busy timer cannot make clone() restart forever;
 * parent restores the mask; child resets the profile state (no timers, no
 * agent threads), restores the host's disposition, then the mask. */
void cpu_timer_fork_prepare(void);
void cpu_timer_fork_parent(void);
void cpu_timer_fork_child(void);

#endif
