/*
 * The wall-clock profile (/debug/pprof/wall): every host thread looked at
 * PPROF_WALL_HZ times a second whatever it is doing, and never sent a
 * directed signal (docs/wall.md has the design, its cost and its truth).
 *
 *   wall_signal.c  the handler of the per-thread CPU-time timers, and
 *                  nothing else: a running thread's most recent stack
 *   wall_timer.c   the session: its signal and handler, the table of
 *                  threads (tid -> timer, slot), arming and disarming, the
 *                  mask and exit hooks, fork
 *   wall_look.c    one tick: which threads are looked at, what /proc says
 *                  of each, the walk of a blocked one (cached while its
 *                  system call stays the same), the charges
 *   wall_bursts.c  which threads run in short bursts (event loops): the
 *                  looks settle and split theirs differently
 *   wall_cost.c    the cost governor: how many threads a tick may look at
 *                  so that the looks' CPU time stays under a share of the
 *                  host's
 *   wall_agg.c     charges grouped by (stack, thread, state, system call)
 *   wall_run.c     a whole profile: the session taken, the ticks at their
 *                  drawn intervals for the seconds asked, the session given
 *                  back (encoder/wall.c writes it)
 *
 * Running threads are sampled by timers on their own CPU clocks, which only
 * advance while the thread runs: a sleeping thread is never interrupted,
 * and on kernels that handle CPU-timer expiry on the way back to user mode
 * (POSIX_CPU_TIMERS_TASK_WORK, x86-64 and arm64 since 5.11) the signal is
 * only ever delivered there, never inside a system call. A timer is armed
 * only on a thread seen running at a tick and disarmed when it is seen
 * asleep. Threads blocked in the kernel are walked from /proc and a copy of
 * their stack by the session's own thread (agent/threads/threads.c).
 *
 * Contexts: the handler on any host thread; the mask and exit hooks on host
 * threads inside the interposers; everything else on the one thread that
 * runs the profile (wall_run: an HTTP worker) and holds the session (wall_session_start hands out a single slot).
 */
#ifndef PPROF_WALL_H
#define PPROF_WALL_H

#include "agent/host/signals.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* Frames kept per stack, as the CPU profile. */
#define WALL_STACK_MAX 64
/* Threads one session can follow at once (table slots, a power of two). */
#define WALL_THREADS_MAX 16384
/* si_value of a wall timer: WALL_COOKIE (signals.h) in the top 16 bits,
 * the slot index in bits 32..47, the thread id in the low 32. */

static inline uint64_t wall_timer_value(uint32_t slot, uint32_t tid)
{
    return (WALL_COOKIE << 48) | ((uint64_t)(slot & 0xffff) << 32) | tid;
}

/* ---- signal side (wall_signal.c) ----------------------------------------- */

/*
 * A thread's most recent stack, taken by its own timer's handler. Writer:
 * the handler, on the owning thread only (a timer signals its own thread,
 * and the signal is blocked while its handler runs, so writers never
 * overlap). Reader: the session's thread. Kept apart by a sequence count
 * (a seqlock): the handler makes seq odd, writes, makes it even (release);
 * the reader reads seq (acquire), copies, reads seq again and keeps the
 * copy only if both were the same even number. tid is written by the
 * session before the timer that carries this slot is armed, and cleared
 * when the slot is given up; the handler writes nothing when it is not
 * its own.
 */
struct wall_slot {
    uint32_t seq;   /* odd while written; seq / 2 stacks taken */
    uint32_t tid;   /* the owner; 0: free */
    uint32_t depth;
    uint32_t labels; /* the thread's label set id (agent/core/labels.h) */
    uint64_t nvcsw;  /* its voluntary context switches then; ~0: unknown */
    uintptr_t pcs[WALL_STACK_MAX]; /* leaf first; callers ra - 1 */
};

/* WALL_THREADS_MAX slots, mapped by the first session and never unmapped
 * (a late handler may look at them). */
extern struct wall_slot *wall_slots;

/* Handler statistics of the session (read by the profile's comment). */
struct wall_counters {
    uint64_t taken;   /* stacks the handler wrote */
    uint64_t foreign; /* expiries for a slot that had changed hands */
};
extern struct wall_counters wall_counters;

/* The handler, for sigaction (SA_SIGINFO). Async-signal-safe. */
void wall_signal_handler(int sig, siginfo_t *si, void *uc);

/* Copies slot's stack if it holds one of at least seq `after` + 1 (a stack
 * taken after the reader saw `after`). Returns the slot's sequence number
 * (even) with *depth, pcs and *nvcsw (the thread's voluntary switches when
 * it was taken, ~0 unknown) filled, or 0 when there is none or the handler
 * kept writing. Not async-signal-safe (never runs in one). */
uint32_t wall_slot_read(const struct wall_slot *s, uint32_t after,
                        uintptr_t *pcs, int *depth, uint64_t *nvcsw);

/* ---- the session and its threads (wall_timer.c) -------------------------- */

/* What the session knows of one host thread. The timer fields and tid are
 * changed under sigmask_lock (by the session, and by the thread itself in
 * the mask and exit hooks); the rest belongs to the session's thread. */
struct wall_thread {
    int tid;        /* 0: free; -1: removed (kept for the probe chain) */
    int timer;      /* kernel timer id, -1: none */
    int armed;
    int blocks;     /* blocks wall_signo: 1, 0, -1 not known yet */
    int64_t mask_checked_ns; /* when its mask was last read from /proc */
    uint32_t armed_seq; /* the slot's seq when the timer was last armed */
    /* the looks' own (wall_look.c) */
    int64_t prev_cpu;    /* CPU time at the previous look, ns */
    int prev_blocked;    /* the previous look saw it blocked (walked) */
    int prev_state;      /* and charged this state (enum wall_state) */
    int walk_state;      /* the state of the look that kept its walk */
    uint32_t looked_seq; /* its slot's count at its latest look */
    int sched_seen;      /* sched_cpu and wait_ns hold a read's figures */
    int64_t sched_cpu;   /* its CPU clock at its last schedstat read */
    int64_t wait_ns;     /* schedstat's time waiting on a run queue then,
                            -1 not known */
    int64_t looked_ns;   /* monotonic time of the previous look */
    char letter;         /* state letter of its last stat read */
    int stat_age;        /* looks since then */
    uint64_t walk_key;   /* hash of the call, sp and pc walked; 0 none */
    long walk_nr;        /* the system call of that walk */
    int walk_depth;
    int walk_status;     /* enum thread_stack_status of that walk */
    uintptr_t walk_pcs[WALL_STACK_MAX];
    /* running looks that wait for the thread's next stack */
    int owing;
    uint32_t owed_seq;   /* the stack must be newer than this */
    uint64_t owed_nvcsw; /* and taken before the thread slept again */
    int64_t owed_since;  /* monotonic ns of the first such look */
    int64_t owed_ns[2];  /* running, runnable */
    int64_t owed_count[2];
    /* Owed looks settled in the run they saw, and those whose thread slept
     * first (wall_bursts.c), halved as they grow. */
    uint32_t runs_kept, runs_missed;
    /* Its CPU time and voluntary switches between its running looks (the
     * mean length of its runs, wall_bursts.c), halved as they grow; and
     * both counts at its last running look (nv ~0: none yet). */
    int64_t runs_cpu_ns;
    uint64_t runs_nv;
    int64_t last_run_cpu;
    uint64_t last_run_nv;
    char name[16];
};

/* 1 while a session runs; its signal. */
extern int wall_active;
extern int wall_signo;
/* /proc/self/task held open while a session runs (proc_tasks_open: an
 * FDS_HELD descriptor, re-read at each use), -1 when it could not be
 * opened; closed by the session's end and in a forked child. Written by
 * the session's thread only. */
extern int wall_tasks_fd;
/* Host threads that ended through the exit hook since the session began
 * (the looks read the list of threads again when it moves). Written by
 * the exit hook (under sigmask_lock), read by the session's thread. */
extern uint32_t wall_exits;
/* WALL_THREADS_MAX entries, index = slot index; valid while a session
 * runs. */
extern struct wall_thread *wall_threads;

/* CPU time between two stacks of a running thread, ns. */
#define WALL_TIMER_PERIOD_NS 2000000
/* First expiry after arming: soon, so that a thread that just woke has a
 * stack of what it is doing now. */
#define WALL_TIMER_FIRST_NS 500000

/* Takes the single session slot, maps the table and the slots, installs
 * the handler on a real-time signal the host leaves at its default, and
 * starts watching mask changes. Returns 0, -EBUSY (a session runs),
 * -EAGAIN (no signal free) or -ENOMEM. Not async-signal-safe. */
int wall_session_start(void);

/* Deletes every timer, puts the host's disposition back, frees the slot.
 * Not async-signal-safe. */
void wall_session_stop(void);

/* Brings the unwind tables up to date with the objects loaded since the
 * last call (once a second while the session runs). Not async-signal-safe. */
void wall_session_refresh(void);

/* The entry of tid, added when absent (NULL when the table is full).
 * Session thread only. Not async-signal-safe. */
struct wall_thread *wall_thread_get(int tid);

/* Forgets the threads not in tids (sorted, n of them): deletes their
 * timers and frees their slots. Session thread only.
 * Not async-signal-safe. */
void wall_threads_sweep(const int *tids, size_t n);

/* Arms t's timer (creating it on first use; its first expiry after
 * WALL_TIMER_FIRST_NS of the thread's CPU time) unless the thread blocks
 * the signal; looks at its mask in /proc when not known, and again a
 * second after it was last seen blocking it. Returns 1 when armed.
 * Session thread only. Not async-signal-safe. */
int wall_thread_arm(struct wall_thread *t, int64_t now_ns);
/* Stops t's timer (kept for the next arming). Not async-signal-safe. */
void wall_thread_disarm(struct wall_thread *t);

/* Hooks for host threads, no-ops while no session runs: the calling
 * thread's new mask blocks the signal or not (called by the mask
 * interposers with sigmask_lock held), and the calling thread is ending
 * (thread_hooks.c). Not async-signal-safe. */
void wall_thread_mask(int blocks);
void wall_thread_exiting(void);

/* ---- event loops (wall_bursts.c) ---------------------------------------- */

/* 1 when t's runs average under half a millisecond of CPU (at least 64
 * runs counted): the looks split its wall time (wall_look.c, "Awake
 * share"), and wall_bursts_loop takes it for an event loop. Not
 * async-signal-safe (the session's thread only). */
int wall_bursts_short_runs(const struct wall_thread *t);

/* 1 when t is taken for an event loop: its owed running looks wait for
 * its timer's next stack, in whichever burst it comes. Not
 * async-signal-safe (the session's thread only). */
int wall_bursts_loop(const struct wall_thread *t);

/* Counts what t ran (its CPU clock, cpu) and how often it slept (its
 * voluntary switches, nv; ~0 unknown: nothing counted) since its previous
 * running look. Not async-signal-safe (the session's thread only). */
void wall_bursts_count_runs(struct wall_thread *t, int64_t cpu, uint64_t nv);

/* Counts an owed look of t settled in the run it saw (kept 1) or missed
 * (the thread slept before its timer took a stack). Not async-signal-safe
 * (the session's thread only). */
void wall_bursts_count_owed(struct wall_thread *t, int kept);

/* ---- one tick (wall_look.c) ---------------------------------------------- */

/* Threads looked at per tick at most: with more, a round robin, and each
 * charge weighs threads / (looks made at that tick) ticks. */
#define WALL_LOOK_MAX 16
/* At least, whatever the cost governor says (an idle host still gets
 * samples). */
#define WALL_LOOK_MIN 1

/* ---- the cost governor (wall_cost.c) ------------------------------------- */

/* The ticks weighed: about the last this many ns of wall time. */
#define WALL_COST_WINDOW_NS 2000000000LL
/* The process's CPU clock costs O(threads) to read (the kernel sums
 * every thread's: about 140 us with 1,000 threads that run now and then,
 * caches cold): it is read so seldom that this costs at most a tenth of
 * the budget, and at least every WALL_COST_HOST_MAX_NS, at most every
 * WALL_COST_HOST_MIN_NS. */
#define WALL_COST_HOST_MIN_NS 250000000LL
#define WALL_COST_HOST_MAX_NS 5000000000LL

/* The governor's state: sums over the window (decayed), the clocks at the
 * previous tick, totals for the profile's comment. Owned by the session's
 * thread. */
struct wall_cost {
    double share;
    int started, host_seen;
    int64_t tick_ns, own_ns;  /* the previous tick: monotonic, own CPU */
    int64_t host_read_ns, proc_ns, host_own_ns; /* the last process read */
    int64_t host_every;       /* the next read is due this long after */
    int64_t last_look_cpu;    /* the previous tick's looks' CPU, ns */
    double host, host_span;   /* the host's CPU time, over this wall time */
    double rest, wall, ticks; /* CPU besides the looks, wall time, ticks */
    double look_cpu, looks;   /* the looks' CPU, their number */
    double carry;             /* looks allowed and not yet made */
    int64_t own_total, host_total; /* between the first and the last
                                      reads of the process's clock, ns */
};

/* Starts a governor that keeps the session thread's CPU time at or under
 * share (0.009: PPROF_WALL_COST / 1000) of the host's; 0 sets no limit
 * (every tick makes the most looks; the clocks are still kept for the
 * profile's comment). Does not allocate. Not async-signal-safe (never runs
 * in one). */
void wall_cost_init(struct wall_cost *g, double share);

/* 1 when the next wall_cost_plan wants the process's CPU clock (see
 * WALL_COST_HOST_MIN_NS). Not async-signal-safe. */
int wall_cost_host_due(const struct wall_cost *g, int64_t now_ns);

/* The number of looks a tick at monotonic now_ns may make among threads:
 * all of them when there are at most WALL_LOOK_MAX; else WALL_LOOK_MAX,
 * or 0 when the budget allows fewer (then WALL_LOOK_MAX every few ticks,
 * at least WALL_LOOK_MIN a tick on average). own_ns is the session
 * thread's CPU clock at the tick's start, proc_ns the process's (-1 when
 * not read: see wall_cost_host_due), whose reading cost the thread
 * proc_cpu_ns. The most on the first tick and until a look's cost is
 * known. Not async-signal-safe. Does not allocate. */
size_t wall_cost_plan(struct wall_cost *g, int64_t now_ns, int64_t own_ns,
                      int64_t proc_ns, int64_t proc_cpu_ns, size_t threads);

/* What the tick's looks (looks of them) cost the session thread, CPU ns.
 * Not async-signal-safe. Does not allocate. */
void wall_cost_spent(struct wall_cost *g, size_t looks, int64_t cpu_ns);

/* States a charge is labelled with. */
enum wall_state {
    WALL_RUNNING,  /* on a CPU */
    WALL_RUNNABLE, /* ready, waiting for a CPU */
    WALL_SLEEPING, /* blocked, interruptible (S) */
    WALL_DISK,     /* blocked, uninterruptible (D) */
    WALL_OTHER,    /* stopped, traced, exiting */
};
const char *wall_state_name(int state);

/* One charge: a thread seen in a state with a stack, for ns of wall. */
struct wall_charge {
    const uintptr_t *pcs;
    int depth;
    int state;     /* enum wall_state */
    long syscall;  /* the call it is blocked in; -1 none */
    const char *thread;
    int64_t ns;
    int64_t count; /* looks this charge stands for (samples) */
};

/* Per-session counters of the looks, for the profile's comment and the
 * benchmark. */
struct wall_look_counters {
    uint64_t ticks, late, looks;
    uint64_t running, runnable, blocked;
    uint64_t walks;         /* blocked threads walked from a copy */
    uint64_t walks_cached;  /* blocked threads whose cached walk was kept */
    uint64_t owed;          /* running charges that waited for a stack */
    uint64_t no_stack;      /* running charges that never got one */
    uint64_t arms, disarms;
    uint64_t unmoved;       /* looks that found the CPU clock unmoved since
                               a blocked look: charged without /proc */
    uint64_t reads;         /* files read in /proc/self/task/TID */
    uint64_t unreadable;    /* looks whose syscall file could not be read
                               (a process that is not dumpable) */
    uint64_t noted;         /* of those, sleeping threads walked from their
                               note (agent/threads/blocked.h) or its kept walk */
    uint64_t not_noted;     /* sleeping, in a call no hook noted: no stack */
    int64_t not_noted_ns;   /* the wall time charged to those */
    uint64_t relists;       /* listings of /proc/self/task */
    uint64_t skipped;       /* ticks the cost governor let look at no
                               thread (their time goes to the next look) */
    int64_t look_ns;        /* wall time spent looking, summed */
    int64_t look_cpu_ns;    /* the session thread's CPU time for it */
};

/* Running looks waiting for a stack, at most (more are charged without). */
#define WALL_OWED_MAX 256

/* The tick's state: the list of threads, the round robin, the counters. */
struct wall_looker {
    int *tids;
    size_t n;
    size_t cursor;
    int64_t listed_ns;  /* when tids was read */
    long listed_total;  /* threads then, the agent's included */
    uint32_t exits_seen; /* wall_exits then */
    int gone;           /* a look found a listed thread gone since */
    int64_t refreshed_ns; /* when the unwind tables were last refreshed */
    void *copy;         /* THREADS_COPY_MAX bytes for stack copies */
    uint32_t owed[WALL_OWED_MAX]; /* entries with owing set */
    size_t nowed;
    struct wall_cost cost;
    int64_t unlooked_ns; /* wall time of the ticks since the last looks */
    uint64_t draw;       /* splitmix64 counter: running or runnable */
    struct wall_look_counters c;
};

/* Prepares and frees a looker (the session must run). Returns 0 or
 * -ENOMEM. Not async-signal-safe. */
int wall_look_init(struct wall_looker *l);
void wall_look_free(struct wall_looker *l);

/* One tick at time now_ns, elapsed_ns after the previous one: looks at as
 * many threads as the cost governor allows (up to WALL_LOOK_MAX) and calls charge() for each look (and for
 * earlier running looks whose stack arrived since). Returns 0 or -ENOMEM
 * (from charge). Session thread only. Not async-signal-safe. */
int wall_look_tick(struct wall_looker *l, int64_t now_ns, int64_t elapsed_ns,
                   int (*charge)(const struct wall_charge *c, void *arg),
                   void *arg);

/* Charges the ticks the cost governor skipped since the last looks (with
 * one more round of looks) and what is still owed (the stacks that never
 * came), and ends the looker's session work. */
int wall_look_finish(struct wall_looker *l,
                     int (*charge)(const struct wall_charge *c, void *arg),
                     void *arg);

/* ---- grouping (wall_agg.c) ----------------------------------------------- */

struct wall_agg;

/* One group, as the encoder reads it. */
struct wall_group {
    uint64_t hash;
    int depth;
    int state;
    long syscall;
    int64_t count;
    int64_t ns;
    char thread[16];
    uintptr_t pcs[WALL_STACK_MAX];
};

struct wall_agg *wall_agg_new(void);
void wall_agg_free(struct wall_agg *a);
/* Adds a charge (a callback for wall_look_tick). Returns 0 or -ENOMEM.
 * Not async-signal-safe. */
int wall_agg_add(const struct wall_charge *c, void *agg);
/* The groups, in the order they were first charged. */
const struct wall_group *wall_agg_groups(const struct wall_agg *a,
                                         size_t *n);

/* ---- a whole profile (wall_run.c) ---------------------------------------- */

/* What a wall profile's run measured, for its writer (encoder/wall.c). */
struct wall_run {
    int started;          /* the session was taken and the ticks began */
    int gone;             /* the reader went away: the profile is void */
    int hz;               /* PPROF_WALL_HZ */
    int64_t period_ns;    /* the ticks' mean interval */
    int64_t start_ns;     /* agent_now_ns() when the ticks began */
    int64_t duration_ns;
    uint64_t late;        /* ticks later than a period */
    uint64_t timer_stacks; /* stacks the CPU-time timers' handler wrote */
    long long share;      /* the session thread's CPU over the rest of the
                             process's, hundredths of a percent */
    struct wall_look_counters c;
};

/* Runs a wall profile of seconds on the calling thread, charging into
 * agg: takes the session (returns its error, -EBUSY, -EAGAIN or -ENOMEM,
 * with run->started 0), ticks until the time is up or gone(arg) (asked
 * once a second; NULL: never) says the reader left (run->gone), and gives
 * the session back. Returns 0 or -errno. Not async-signal-safe. */
int wall_run(long seconds, struct wall_agg *agg, int (*gone)(void *arg),
             void *arg, struct wall_run *run);

/* The fork steps (agent/fork.c calls them in order): prepare blocks
 * the wall signal on the forking thread while a session runs, parent
 * restores the mask, child forgets the session (no timer and no session
 * thread came along) and gives the signal back. Not async-signal-safe. */
void wall_fork_prepare(void);
void wall_fork_parent(void);
void wall_fork_child(void);

#endif
