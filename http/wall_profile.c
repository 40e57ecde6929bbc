/*
 * /debug/pprof/wall?seconds=N: a wall-clock profile. Every host thread is
 * sampled PPROF_WALL_HZ times a second (default 50) whatever it is doing,
 * by taking a threads dump (agent/threads.c) per tick from this worker:
 * running threads answer a signal, threads blocked in a call a signal
 * would cut short are walked from a copy of their stack and never
 * signalled. Each sample weighs the wall time since the previous tick (a
 * late tick weighs more), so shares stay right when the machine is busy.
 * Samples are grouped by (stack, thread name, state, system call); the
 * encoder (encoder/wall.c) writes them. Runs on an HTTP worker.
 */
#include "http/http.h"

#include "agent/agent.h"
#include "agent/symbols.h"
#include "agent/threads.h"
#include "encoder/encoder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct wall_group {
    uint64_t hash;
    int depth;
    char thread[16];
    char state;
    long syscall;
    int64_t count, wall_ns;
    uintptr_t pcs[THREADS_STACK_MAX + 1];
};

/* Groups in an array, found through an open-addressing index of
 * positions + 1 (0: empty), kept at most half full. */
struct wall_agg {
    struct wall_group *g;
    size_t n, cap;
    uint32_t *index;
    size_t slots;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v;
    return h * 0x100000001b3ULL;
}

static int same(const struct wall_group *a, const struct wall_group *b)
{
    return a->hash == b->hash && a->depth == b->depth &&
           a->state == b->state && a->syscall == b->syscall &&
           strcmp(a->thread, b->thread) == 0 &&
           memcmp(a->pcs, b->pcs, (size_t)a->depth * sizeof a->pcs[0]) == 0;
}

static int grow(struct wall_agg *a)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        struct wall_group *g = realloc(a->g, cap * sizeof *g);
        if (!g)
            return -1;
        a->g = g;
        a->cap = cap;
    }
    if ((a->n + 1) * 2 > a->slots) {
        size_t slots = a->slots ? a->slots * 2 : 1024;
        uint32_t *index = calloc(slots, sizeof *index);
        if (!index)
            return -1;
        for (size_t i = 0; i < a->n; i++) {
            size_t s = a->g[i].hash & (slots - 1);
            while (index[s])
                s = (s + 1) & (slots - 1);
            index[s] = (uint32_t)(i + 1);
        }
        free(a->index);
        a->index = index;
        a->slots = slots;
    }
    return 0;
}

static int add(struct wall_agg *a, const struct wall_group *key, int64_t ns)
{
    if (grow(a) != 0)
        return -1;
    size_t s = key->hash & (a->slots - 1);
    for (; a->index[s]; s = (s + 1) & (a->slots - 1)) {
        struct wall_group *g = &a->g[a->index[s] - 1];
        if (same(g, key)) {
            g->count++;
            g->wall_ns += ns;
            return 0;
        }
    }
    a->g[a->n] = *key;
    a->g[a->n].count = 1;
    a->g[a->n].wall_ns = ns;
    a->index[s] = (uint32_t)(++a->n);
    return 0;
}

/* One tick: every host thread's sample, weighing ns. */
static int sample(struct wall_agg *a, int64_t ns, size_t *threads)
{
    struct thread_dump d;
    if (threads_dump(&d) != 0)
        return -1;
    int err = 0;
    for (size_t i = 0; i < d.n && !err; i++) {
        const struct thread_info *t = &d.threads[i];
        struct wall_group k;
        memset(&k, 0, sizeof k);
        k.depth = t->depth;
        memcpy(k.pcs, t->pcs, (size_t)t->depth * sizeof t->pcs[0]);
        if (t->status != THREAD_STACK_OK || k.depth == 0)
            k.pcs[k.depth++] = FRAME_UNAVAILABLE;
        memcpy(k.thread, t->name, sizeof k.thread);
        k.thread[sizeof k.thread - 1] = '\0';
        k.state = t->state;
        k.syscall = t->syscall;
        uint64_t h = 0xcbf29ce484222325ULL;
        for (int f = 0; f < k.depth; f++)
            h = mix(h, k.pcs[f]);
        for (const char *c = k.thread; *c; c++)
            h = mix(h, (unsigned char)*c);
        h = mix(h, (uint64_t)(unsigned char)k.state);
        k.hash = mix(h, (uint64_t)k.syscall);
        err = add(a, &k, ns);
    }
    *threads += d.n;
    threads_dump_free(&d);
    return err;
}

static void sleep_until(int64_t when_ns)
{
    struct timespec ts = {when_ns / 1000000000, when_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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
    int64_t period = 1000000000 / opt_wall_hz;
    struct wall_agg agg = {0};
    int64_t start = agent_now_ns();
    int64_t t0 = mono_ns(), end = t0 + seconds * 1000000000LL;
    int64_t prev = t0 - period, next = t0;
    long ticks = 0, late = 0;
    size_t threads = 0;
    int gone = 0, err = 0;
    while (next < end && !err) {
        int64_t now = mono_ns();
        if (now > next + period) {
            /* Behind (a slow dump, a busy machine): skip to the next tick;
             * the next sample weighs the whole time since the last. */
            late++;
            next += (now - next) / period * period;
        }
        sleep_until(next);
        now = mono_ns();
        err = sample(&agg, now - prev, &threads);
        prev = now;
        ticks++;
        next += period;
        if (ticks % opt_wall_hz == 0 && http_client_gone(r)) {
            gone = 1;
            break;
        }
    }
    int64_t duration = agent_now_ns() - start;
    if (gone || err) {
        if (err)
            http_error(r, 500, "failed to collect profile");
        free(agg.g);
        free(agg.index);
        return;
    }
    struct wall_record *recs = calloc(agg.n ? agg.n : 1, sizeof *recs);
    char (*names)[24] = calloc(agg.n ? agg.n : 1, sizeof *names);
    struct pbuf out = {0};
    err = !recs || !names;
    for (size_t i = 0; !err && i < agg.n; i++) {
        const struct wall_group *g = &agg.g[i];
        recs[i].pcs = g->pcs;
        recs[i].depth = g->depth;
        recs[i].count = g->count;
        recs[i].wall_ns = g->wall_ns;
        recs[i].thread = g->thread;
        recs[i].state = threads_state_name(g->state);
        if (g->syscall >= 0) {
            const char *sc = threads_syscall_name(g->syscall);
            if (sc)
                snprintf(names[i], sizeof names[i], "%s", sc);
            else
                snprintf(names[i], sizeof names[i], "syscall %ld",
                         g->syscall);
            recs[i].syscall = names[i];
        }
    }
    if (!err) {
        char comment[160];
        snprintf(comment, sizeof comment,
                 "pprofagent: %ld ticks at %d Hz (%ld late), %zu thread "
                 "samples",
                 ticks, opt_wall_hz, late, threads);
        err = wall_profile_proto(recs, agg.n, period, start, duration,
                                 comment, &out);
    }
    if (err == 0)
        http_send_profile(r, "wall", &out);
    else
        http_error(r, 500, "failed to collect profile");
    pbuf_free(&out);
    free(names);
    free(recs);
    free(agg.g);
    free(agg.index);
}
