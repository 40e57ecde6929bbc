/*
 * A whole wall profile: takes the session, ticks at PPROF_WALL_HZ for the
 * seconds asked, and gives the session back, for whoever writes the
 * profile (the HTTP route today; anything that can spare a thread for the
 * length of the profile).
 *
 * Ticks: each tick's interval is drawn uniformly in [period/2, 3*period/2)
 * so that they cannot fall into step with a program's own cycle, and each
 * tick's charges weigh the wall time since the previous tick that looked
 * (a late tick on a busy machine weighs more; the cost governor may let a
 * tick look at no thread), so the shares stay right.
 *
 * Context: the calling thread, for the length of the profile; allocates.
 */
#include "agent/wall/wall.h"
#include "agent/core/real.h"

#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/core/hash.h"

#include <errno.h>
#include <time.h>

static void sleep_until(int64_t when_ns)
{
    struct timespec ts = {when_ns / 1000000000, when_ns % 1000000000};
    while (real_clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* The ticks, until end_ns or until gone(arg) (asked once a second). */
static int tick_until(struct wall_looker *l, int64_t end_ns,
                      struct wall_agg *agg, int (*gone)(void *arg),
                      void *arg, struct wall_run *run)
{
    int64_t period = run->period_ns;
    int64_t t0 = agent_mono_ns();
    int64_t prev = t0 - period, next = t0, checked = t0;
    uint64_t rnd = rand_seed((uint64_t)run->start_ns);
    int err = 0;
    while (next < end_ns && !err && !run->gone) {
        sleep_until(next);
        int64_t now = agent_mono_ns();
        if (now - next > period)
            run->late++;
        err = wall_look_tick(l, now, now - prev, wall_agg_add, agg);
        prev = now;
        next = now + period / 2 + (int64_t)(rand_next(&rnd) % (uint64_t)period);
        if (gone && now - checked >= 1000000000LL) {
            checked = now;
            run->gone = gone(arg);
        }
    }
    return err;
}

int wall_run(long seconds, struct wall_agg *agg, int (*gone)(void *arg),
             void *arg, struct wall_run *run)
{
    *run = (struct wall_run){.period_ns = 1000000000LL / opt_wall_hz,
                             .hz = opt_wall_hz};
    int err = wall_session_start();
    if (err != 0)
        return err;
    struct wall_looker l;
    if (wall_look_init(&l) != 0) {
        wall_session_stop();
        return -ENOMEM;
    }
    run->started = 1;
    run->start_ns = agent_now_ns();
    err = tick_until(&l, agent_mono_ns() + seconds * 1000000000LL, agg, gone, arg,
                     run);
    if (!err)
        err = wall_look_finish(&l, wall_agg_add, agg);
    wall_session_stop();
    run->duration_ns = agent_now_ns() - run->start_ns;
    run->c = l.c;
    run->timer_stacks = wall_counters.taken;
    /* The session thread's CPU time as a share of the rest of the
     * process's, in hundredths of a percent. */
    run->share = l.cost.host_total > 0
                     ? l.cost.own_total * 10000 / l.cost.host_total
                     : 0;
    wall_look_free(&l);
    return err;
}
