/*
 * The wall profile's cost governor: how many threads a tick may look at so
 * that the session thread's own CPU time stays at or under a share of the
 * rest of the process's (the host's): PPROF_WALL_COST thousandths, 9 by
 * default, 0.9%, which leaves room under 1% for what the window's lag and
 * the agent's other costs add; as production wall-clock profilers bound
 * theirs to an overhead target.
 *
 * What it weighs, over about the last WALL_COST_WINDOW_NS (sums that decay
 * with the wall time that passes, so old ticks fade out):
 *  - the host's CPU time: the process's CPU clock minus the session
 *    thread's. The kernel sums every thread's clock for it (about 140 us
 *    with 1,000 threads that wake now and then: their task structures are
 *    not in the cache), so it is read seldom: as often as keeps that at a
 *    tenth of the budget, between WALL_COST_HOST_MIN_NS and _MAX_NS;
 *  - what a look costs: the session thread's CPU time in the looks over
 *    the number of looks. Measured, not assumed: a look that finds the CPU
 *    clock unmoved reads nothing and costs a microsecond, one that reads
 *    the syscall file about 10, the first look at a thread (its stat, a
 *    copy and walk of its stack) 30 or more, and the mix changes with the
 *    threads and with the number of looks itself;
 *  - what a tick costs besides its looks: the session thread's CPU time
 *    between two ticks minus the looks (its sleep and wake-up, the owed
 *    stacks, the listings of the threads, the refreshes, these clocks).
 * That allows (share x host CPU a tick - the rest of a tick) / (a look's
 * cost) looks a tick, at least WALL_LOOK_MIN (an idle host still gets
 * samples). When that is at least WALL_LOOK_MAX, every tick makes that
 * many. With at most WALL_LOOK_MAX threads, every tick looks at all of
 * them whatever the budget: the governor bounds the round robin over many
 * threads, and a tick that sees every thread costs no more than it did
 * without one, while a few threads' profile (the truth test's: six threads
 * that compute, beside other work, at 50 Hz) would lose the resolution it
 * was asked for. When it is fewer, a tick
 * makes either the maximum or none, the allowance carried from tick to
 * tick: looks made together cost a fraction of looks made apart. One look
 * a tick on its own keeps nothing warm (the kernel's /proc paths, the
 * dentries, the unwind tables): with 1,000 idle threads a first look
 * (reads, copy, walk) cost 99 us of CPU made alone at a tick and 32 us as
 * one of a batch, and the wake-up a tick costs anyway is shared by more
 * looks. Before it
 * knows what a look costs (the first tick) it allows the maximum, once.
 *
 * The governor changes how many threads are looked at, never what a look
 * is worth: each look made weighs (the wall time since the previous tick
 * that looked) x threads / (looks made at that tick), so a tick's charges
 * always add up to the threads' wall time since then, whatever the number
 * (wall_look.c).
 *
 * Context: the session's thread only (wall_look.c); no clock is read here,
 * the caller passes them. Does not allocate.
 */
#include "agent/wall/wall.h"

#include <string.h>

void wall_cost_init(struct wall_cost *g, double share)
{
    memset(g, 0, sizeof *g);
    g->share = share;
}

int wall_cost_host_due(const struct wall_cost *g, int64_t now_ns)
{
    return !g->host_seen || g->host_span <= 0 ||
           now_ns - g->host_read_ns >= g->host_every;
}

/* Fades the window's sums by the wall time passed since the previous
 * tick: by W / (W + dt), about exp(-dt / W) for a tick much shorter than
 * the window W, and never 0. */
static void fade(struct wall_cost *g, int64_t dt)
{
    double d = (double)WALL_COST_WINDOW_NS /
               (double)(WALL_COST_WINDOW_NS + (dt > 0 ? dt : 0));
    g->host *= d;
    g->host_span *= d;
    g->rest *= d;
    g->wall *= d;
    g->ticks *= d;
    g->look_cpu *= d;
    g->looks *= d;
}

/* How long until the process's clock is read again: its cost at most a
 * tenth of the budget (share x the host's CPU rate). */
static int64_t host_every(const struct wall_cost *g, int64_t cost)
{
    double rate = g->host_span > 0 ? g->share * g->host / g->host_span : 0;
    double every = rate > 0 ? 10 * (double)cost / rate
                            : (double)WALL_COST_HOST_MAX_NS;
    return every < WALL_COST_HOST_MIN_NS   ? WALL_COST_HOST_MIN_NS
           : every > WALL_COST_HOST_MAX_NS ? WALL_COST_HOST_MAX_NS
                                           : (int64_t)every;
}

size_t wall_cost_plan(struct wall_cost *g, int64_t now_ns, int64_t own_ns,
                      int64_t proc_ns, int64_t proc_cpu_ns, size_t threads)
{
    size_t max = threads < WALL_LOOK_MAX ? threads : WALL_LOOK_MAX;
    if (!g->started) {
        g->started = 1;
        g->tick_ns = now_ns;
        g->own_ns = own_ns;
        if (proc_ns >= 0) {
            g->host_seen = 1;
            g->host_read_ns = now_ns;
            g->proc_ns = proc_ns;
            g->host_own_ns = own_ns;
            g->host_every = WALL_COST_HOST_MIN_NS;
        }
        return max;
    }
    fade(g, now_ns - g->tick_ns);
    /* The previous tick: what the thread spent besides its looks. */
    int64_t spent = own_ns - g->own_ns;
    double rest = (double)(spent - g->last_look_cpu);
    g->rest += rest > 0 ? rest : 0;
    g->wall += (double)(now_ns - g->tick_ns);
    g->ticks += 1;
    g->tick_ns = now_ns;
    g->own_ns = own_ns;
    if (proc_ns >= 0) {
        if (g->host_seen) {
            int64_t host = (proc_ns - g->proc_ns) - (own_ns - g->host_own_ns);
            if (host < 0)
                host = 0;
            g->host += (double)host;
            g->host_span += (double)(now_ns - g->host_read_ns);
            g->host_total += host;
            g->own_total += own_ns - g->host_own_ns;
        }
        g->host_seen = 1;
        g->host_read_ns = now_ns;
        g->proc_ns = proc_ns;
        g->host_own_ns = own_ns;
        g->host_every = host_every(g, proc_cpu_ns);
    }
    g->last_look_cpu = 0;
    if (threads <= WALL_LOOK_MAX || g->share <= 0 || g->looks <= 0 ||
        g->host_span <= 0 || g->ticks <= 0)
        return max;
    /* Per tick: the budget (share x the host's CPU time a tick), less the
     * rest of a tick, over a look's cost. */
    double tick = g->wall / g->ticks;
    double budget = g->share * g->host / g->host_span * tick;
    double look = g->look_cpu / g->looks;
    double allowed = (budget - g->rest / g->ticks) / (look > 0 ? look : 1);
    if (allowed < WALL_LOOK_MIN)
        allowed = WALL_LOOK_MIN;
    if (allowed >= (double)max) {
        g->carry = 0;
        return max;
    }
    /* Fewer: max at once, every few ticks (see the file's top). */
    g->carry += allowed;
    if (g->carry < (double)max)
        return 0;
    g->carry -= (double)max;
    return max;
}

void wall_cost_spent(struct wall_cost *g, size_t looks, int64_t cpu_ns)
{
    g->last_look_cpu = cpu_ns;
    g->look_cpu += (double)cpu_ns;
    g->looks += (double)looks;
}
