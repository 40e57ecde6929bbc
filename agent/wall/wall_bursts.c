/*
 * Bursts: which threads are event loops, as far as the wall profile's
 * looks are concerned.
 *
 * A look that finds a thread on a CPU is settled with a stack its
 * CPU-time timer takes in the same run (before it sleeps again). A thread
 * that runs in short bursts between waits (an event loop: redis runs a
 * few hundred microseconds, then waits in epoll_wait) nearly always
 * sleeps before its timer fires (the kernel checks CPU timers at its
 * ticks), and all its on-CPU time was [stack unavailable]. When a thread's
 * owed looks miss their run more than BURSTS_RATIO times as often as not
 * (at least BURSTS_MIN misses), it is taken for such a loop; so is one
 * whose runs are on average shorter than BURSTS_RUN_NS of CPU (its CPU
 * time over its voluntary switches between its running looks, at least
 * BURSTS_RUNS_MIN of them): the timer seldom fires in such runs, and a
 * few runs that it does fire in (the ticks fall as they fall) do not make
 * it another kind of thread. Its bursts are alike, and its owed looks
 * wait for the timer's next stack, in whichever burst the timer takes it
 * (within wall_look.c's OWED_MAX_NS). That stack is drawn in proportion
 * to the thread's CPU time, as the running charges are. Not for every
 * thread: one that mixes long runs with short bursts (work, then a short
 * wake-up between two waits) would see its bursts' time charged to its
 * long runs, which the ticks hit more often. The looks also split the
 * wall time of a thread whose runs are short ("Awake share", wall_look.c).
 *
 * This file keeps the counts (fields runs_* and last_run_* of struct
 * wall_thread) and answers from them; it reads no clock and no file.
 *
 * Context: the session's thread only (wall_look.c). Does not allocate.
 */
#include "agent/wall/wall.h"

#define BURSTS_MIN 3
#define BURSTS_RATIO 4
#define BURSTS_HALVE 256
#define BURSTS_RUN_NS 500000LL
#define BURSTS_RUNS_MIN 64
#define BURSTS_RUNS_HALVE (1ULL << 20)

int wall_bursts_short_runs(const struct wall_thread *t)
{
    return t->runs_nv >= BURSTS_RUNS_MIN &&
           t->runs_cpu_ns < BURSTS_RUN_NS * (int64_t)t->runs_nv;
}

int wall_bursts_loop(const struct wall_thread *t)
{
    if (t->runs_missed < BURSTS_MIN)
        return 0;
    return t->runs_missed > BURSTS_RATIO * t->runs_kept ||
           wall_bursts_short_runs(t);
}

void wall_bursts_count_runs(struct wall_thread *t, int64_t cpu, uint64_t nv)
{
    if (nv == ~0ULL)
        return;
    if (t->last_run_nv != ~0ULL && nv >= t->last_run_nv &&
        cpu >= t->last_run_cpu) {
        t->runs_cpu_ns += cpu - t->last_run_cpu;
        t->runs_nv += nv - t->last_run_nv;
        if (t->runs_nv >= BURSTS_RUNS_HALVE) {
            t->runs_nv /= 2;
            t->runs_cpu_ns /= 2;
        }
    }
    t->last_run_cpu = cpu;
    t->last_run_nv = nv;
}

void wall_bursts_count_owed(struct wall_thread *t, int kept)
{
    if (kept)
        t->runs_kept++;
    else
        t->runs_missed++;
    if (t->runs_kept + t->runs_missed >= BURSTS_HALVE) {
        t->runs_kept /= 2;
        t->runs_missed /= 2;
    }
}
