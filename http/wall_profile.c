/*
 * /debug/pprof/wall?seconds=N: a wall-clock profile over N seconds
 * (default 30). Every host thread is looked at, whatever it is doing, at
 * PPROF_WALL_HZ ticks a second (agent/wall/wall_look.c): running ones through
 * their own CPU-time timers' stacks, blocked ones walked where they stand;
 * no thread is ever sent a signal by anyone but its own CPU clock. One
 * profile at a time, as the CPU profile: a second request gets 500. A
 * client that goes away ends the profile.
 *
 * Ticks: each tick's interval is drawn uniformly in [period/2, 3*period/2)
 * so that they cannot fall into step with a program's own cycle, and each
 * tick's charges weigh the wall time since the previous tick that looked
 * (a late tick on a busy machine weighs more; the cost governor may let a
 * tick look at no thread), so the shares stay right.
 *
 * Runs on an HTTP worker for the length of the profile.
 */
#include "http/http.h"

#include "agent/agent.h"
#include "agent/threads.h"
#include "agent/wall.h"
#include "encoder/encoder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t when_ns)
{
    struct timespec ts = {when_ns / 1000000000, when_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static uint64_t next_random(uint64_t *state)
{
    uint64_t x = (*state += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static int encode(const struct wall_agg *agg, int64_t period,
                  int64_t start, int64_t duration, const char *comment,
                  struct pbuf *out)
{
    size_t n;
    const struct wall_group *g = wall_agg_groups(agg, &n);
    struct wall_record *recs = calloc(n ? n : 1, sizeof *recs);
    char (*names)[24] = calloc(n ? n : 1, sizeof *names);
    int err = -ENOMEM;
    if (recs && names) {
        for (size_t i = 0; i < n; i++) {
            recs[i].pcs = g[i].pcs;
            recs[i].depth = g[i].depth;
            recs[i].count = g[i].count;
            recs[i].wall_ns = g[i].ns;
            recs[i].thread = g[i].thread;
            recs[i].state = wall_state_name(g[i].state);
            if (g[i].syscall >= 0) {
                const char *sc = threads_syscall_name(g[i].syscall);
                if (sc)
                    snprintf(names[i], sizeof names[i], "%s", sc);
                else
                    snprintf(names[i], sizeof names[i], "syscall %ld",
                             g[i].syscall);
                recs[i].syscall = names[i];
            }
        }
        err = wall_profile_proto(recs, n, period, start, duration, comment,
                                 out);
    }
    free(names);
    free(recs);
    return err;
}

void handle_wall(struct request *r)
{
    char buf[64];
    long seconds = 30;
    if (http_param(r, "seconds", buf, sizeof buf) && buf[0] != '\0' &&
        config_parse_long(buf, 1, 3600, &seconds) != 0) {
        http_error(r, 400,
                   "invalid value for \"seconds\" - must be a positive "
                   "integer (at most 3600)");
        return;
    }
    int err = wall_session_start();
    if (err != 0) {
        http_error(r, 500,
                   err == -EBUSY
                       ? "Could not enable wall profiling: wall profiling "
                         "already in use"
                   : err == -EAGAIN
                       ? "Could not enable wall profiling: every real-time "
                         "signal is in use by the program"
                       : "Could not enable wall profiling: out of memory");
        return;
    }
    struct wall_looker l;
    struct wall_agg *agg = wall_agg_new();
    if (!agg || wall_look_init(&l) != 0) {
        wall_session_stop();
        wall_agg_free(agg);
        http_error(r, 500, "Could not enable wall profiling: out of memory");
        return;
    }

    int64_t period = 1000000000LL / opt_wall_hz;
    int64_t start = agent_now_ns();
    int64_t t0 = mono_ns(), end = t0 + seconds * 1000000000LL;
    int64_t prev = t0 - period, next = t0, checked = t0;
    uint64_t rnd = (uint64_t)start;
    uint64_t late = 0;
    int gone = 0;
    while (next < end && !err && !gone) {
        sleep_until(next);
        int64_t now = mono_ns();
        if (now - next > period)
            late++;
        err = wall_look_tick(&l, now, now - prev, wall_agg_add, agg);
        prev = now;
        next = now + period / 2 + (int64_t)(next_random(&rnd) % (uint64_t)period);
        if (now - checked >= 1000000000LL) {
            checked = now;
            gone = http_client_gone(r);
        }
    }
    if (!err)
        err = wall_look_finish(&l, wall_agg_add, agg);
    wall_session_stop();
    int64_t duration = agent_now_ns() - start;
    struct wall_look_counters c = l.c;
    /* The session thread's CPU time as a share of the rest of the
     * process's, in hundredths of a percent. */
    long long share = l.cost.host_total > 0
                          ? l.cost.own_total * 10000 / l.cost.host_total
                          : 0;
    wall_look_free(&l);
    if (gone || err) {
        if (err)
            http_error(r, 500, "failed to collect profile");
        wall_agg_free(agg);
        return;
    }

    char comment[768];
    log_snprintf(comment, sizeof comment,
                 "pprofagent: %llu ticks at %d Hz (%llu late), %llu looks "
                 "(running %llu, runnable %llu, blocked %llu; %llu not run "
                 "since the previous look); %llu /proc reads (%llu syscall "
                 "files unreadable: not dumpable), %llu listings "
                 "of the threads; blocked walks "
                 "%llu, kept %llu; running looks that waited for a stack "
                 "%llu, without one %llu; timer stacks %llu, arms %llu, "
                 "disarms %llu; looking took %llu us a tick (%llu us of CPU); "
                 "%llu ticks skipped by the cost governor, this thread's CPU "
                 "%lld.%lld%lld%% of the rest of the process's",
                 (unsigned long long)c.ticks, opt_wall_hz,
                 (unsigned long long)late, (unsigned long long)c.looks,
                 (unsigned long long)c.running,
                 (unsigned long long)c.runnable,
                 (unsigned long long)c.blocked, (unsigned long long)c.unmoved,
                 (unsigned long long)c.reads, (unsigned long long)c.unreadable,
                 (unsigned long long)c.relists,
                 (unsigned long long)c.walks,
                 (unsigned long long)c.walks_cached,
                 (unsigned long long)c.owed, (unsigned long long)c.no_stack,
                 (unsigned long long)wall_counters.taken,
                 (unsigned long long)c.arms, (unsigned long long)c.disarms,
                 (unsigned long long)(c.ticks ? c.look_ns / (int64_t)c.ticks / 1000
                                              : 0),
                 (unsigned long long)(c.ticks ? c.look_cpu_ns / (int64_t)c.ticks / 1000
                                              : 0),
                 (unsigned long long)c.skipped, share / 100, share / 10 % 10,
                 share % 10);
    log_debug("wall profile: %s", comment);
    notes_set("wall", comment + strlen("pprofagent: "));
    struct pbuf out = {0};
    err = encode(agg, period, start, duration, NULL, &out);
    wall_agg_free(agg);
    if (err == 0)
        http_send_profile(r, "wall", &out);
    else
        http_error(r, 500, "failed to collect profile");
    pbuf_free(&out);
}
