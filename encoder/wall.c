/*
 * The wall-clock profile (/debug/pprof/wall): what every host thread was
 * doing, running or blocked, as a proto with two values per sample (looks,
 * wall nanoseconds) and the labels thread, state and syscall, so that
 * -tagfocus=state=sleeping is the off-CPU profile. Runs on the agent's
 * server threads only.
 */
#include "encoder/encoder.h"
#include "agent/core/real.h"

#include "agent/log.h"
#include "agent/threads/threads.h"
#include "agent/wall/wall.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int wall_profile_proto(const struct wall_record *recs, size_t n,
                       int64_t period_ns, int64_t time_nanos,
                       int64_t duration_nanos, const char *comment,
                       struct pbuf *out)
{
    struct profile *p = profile_timed("wall", period_ns, time_nanos,
                                      duration_nanos, comment);
    if (!p)
        return -ENOMEM;
    profile_default_sample_type(p, "wall");

    struct stack_encoder *se = stacks_begin(p);
    if (!se) {
        profile_free(p);
        return -ENOMEM;
    }
    uint64_t ids[256];
    for (size_t i = 0; i < n; i++) {
        size_t depth = (size_t)recs[i].depth;
        if (depth > sizeof ids / sizeof ids[0])
            depth = sizeof ids / sizeof ids[0];
        size_t nids = stacks_locations(se, recs[i].pcs, depth, ids);
        struct profile_label labels[3] = {
            {.key = "thread", .str = recs[i].thread},
            {.key = "state", .str = recs[i].state},
            {.key = "syscall", .str = recs[i].syscall},
        };
        size_t nlabels = recs[i].syscall ? 3 : 2;
        int64_t values[2] = {recs[i].count, recs[i].wall_ns};
        profile_sample(p, ids, nids, values, 2, labels, nlabels);
    }
    stacks_end(se);
    int err = profile_write_gzip(p, out);
    profile_free(p);
    return err;
}

/* The run's figures, as the profile's comment. */
static void describe(const struct wall_run *run, char *comment, size_t size)
{
    const struct wall_look_counters *c = &run->c;
    long long share = run->share;
    log_snprintf(comment, size,
                 "pprofagent: %llu ticks at %d Hz (%llu late), %llu looks "
                 "(running %llu, runnable %llu, blocked %llu; %llu not run "
                 "since the previous look); %llu /proc reads (%llu syscall "
                 "files unreadable: not dumpable; sleeping walked from "
                 "notes %llu, without one %llu), %llu listings "
                 "of the threads; blocked walks "
                 "%llu, kept %llu; running looks that waited for a stack "
                 "%llu, without one %llu; timer stacks %llu, arms %llu, "
                 "disarms %llu; looking took %llu us a tick (%llu us of CPU); "
                 "%llu ticks skipped by the cost governor, this thread's CPU "
                 "%lld.%lld%lld%% of the rest of the process's",
                 (unsigned long long)c->ticks, run->hz,
                 (unsigned long long)run->late, (unsigned long long)c->looks,
                 (unsigned long long)c->running,
                 (unsigned long long)c->runnable,
                 (unsigned long long)c->blocked, (unsigned long long)c->unmoved,
                 (unsigned long long)c->reads, (unsigned long long)c->unreadable,
                 (unsigned long long)c->noted,
                 (unsigned long long)c->not_noted,
                 (unsigned long long)c->relists,
                 (unsigned long long)c->walks,
                 (unsigned long long)c->walks_cached,
                 (unsigned long long)c->owed, (unsigned long long)c->no_stack,
                 (unsigned long long)run->timer_stacks,
                 (unsigned long long)c->arms, (unsigned long long)c->disarms,
                 (unsigned long long)(c->ticks ? c->look_ns / (int64_t)c->ticks / 1000
                                               : 0),
                 (unsigned long long)(c->ticks ? c->look_cpu_ns / (int64_t)c->ticks / 1000
                                               : 0),
                 (unsigned long long)c->skipped, share / 100, share / 10 % 10,
                 share % 10);
}

/* A process that is not dumpable: the profile's comment says how much of
 * its wall time has no stack for that reason (NULL: it is dumpable). */
static const char *undumpable_note(const struct wall_run *run,
                                   const struct wall_group *g, size_t n,
                                   char *buf, size_t size)
{
    const struct wall_look_counters *c = &run->c;
    if (!c->unreadable)
        return NULL;
    int64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += g[i].ns;
    long long tenths =
        total > 0 ? (long long)((double)c->not_noted_ns * 1000 / (double)total)
                  : 0;
    log_snprintf(buf, size,
                 "pprofagent: the process is not dumpable (it changed its "
                 "user, or said PR_SET_DUMPABLE 0), so its threads' /proc "
                 "syscall files cannot be read; "
                 "sleeping threads are walked from where the agent's hooks "
                 "saw them enter their call (%llu looks); %lld.%lld%% of the "
                 "wall time is in calls the agent does not note (%llu looks): "
                 "[stack unavailable: not dumpable, ...]",
                 (unsigned long long)c->noted, tenths / 10, tenths % 10,
                 (unsigned long long)c->not_noted);
    return buf;
}

int wall_write(const struct wall_agg *agg, const struct wall_run *run,
               struct pbuf *out)
{
    char comment[1024];
    describe(run, comment, sizeof comment);
    log_debug("wall profile: %s", comment);
    /* The agent's counters are its own business, not the profile's (Go's
     * carry none): /debug/stats and the index show them. */
    notes_set("wall", comment + strlen("pprofagent: "));
    size_t n;
    const struct wall_group *g = wall_agg_groups(agg, &n);
    struct wall_record *recs = real_calloc(n ? n : 1, sizeof *recs);
    char (*names)[24] = real_calloc(n ? n : 1, sizeof *names);
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
        char why[320];
        const char *note = undumpable_note(run, g, n, why, sizeof why);
        err = wall_profile_proto(recs, n, run->period_ns, run->start_ns,
                                 run->duration_ns, note, out);
    }
    real_free(names);
    real_free(recs);
    return err;
}
