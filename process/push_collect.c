/*
 * What one push interval carries (process/push.h): what the pull endpoints
 * give for the same window, assembled by the same writers (encoder.h) and
 * turned into one OTLP request (encoder/otlp.c):
 *
 * - cpu: the samples of the window (samples/count, cpu/nanoseconds), from
 *   a profile that runs all the time: the push's own (which lets one
 *   /debug/pprof/profile request in as its guest), or, while an HTTP
 *   request or the dumps hold the one profile, theirs, joined as guest;
 * - heap: in-use space and objects now (the heap profile's inuse_*), and
 *   the allocations of the window (a delta of the allocs profile's
 *   alloc_*);
 * - block and mutex: the delays of the window (delta);
 * - every custom profile: its counts' change over the window (delta).
 *
 * Each profile is stamped with the window: its start and its length. The
 * symbolizer keeps what it loaded from one interval to the next (an HTTP
 * request gives it back, as always): reloading the objects' symbols every
 * interval was most of the push's CPU (0.71% of a core on redis at 15 s,
 * 0.25% without, test/bench/push.sh).
 * Runs on the push's collecting thread only (tick and interval), and in
 * the exit path with that thread stopped.
 */
#include "process/push.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/locks/contention.h"
#include "agent/cpu/cpu.h"
#include "agent/custom/custom.h"
#include "agent/heap/heap.h"
#include "agent/log.h"
#include "agent/core/push.h"
#include "agent/stacks/stack_table.h"
#include "encoder/encoder.h"
#include "encoder/otlp.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { CPU_NONE, CPU_OWNER, CPU_GUEST };

static int cpu_mode;
static struct cpu_agg *cpu_agg;
static int64_t window_start;

/* The previous interval's counters, for the deltas. */
static struct stack_snapshot prev_heap, prev_block, prev_mutex;
static struct stack_snapshot *prev_custom;
static size_t nprev_custom;

/* ---- CPU ------------------------------------------------------------------ */

/* Owner of a profile of our own, or guest of the one running; nothing
 * when neither can be (no signal free: said once). */
static void cpu_attach(void)
{
    if (!cpu_agg && !(cpu_agg = cpu_agg_new()))
        return;
    int err = cpu_profile_start(opt_cpu_hz);
    if (err == 0) {
        cpu_profile_share();
        cpu_mode = CPU_OWNER;
        return;
    }
    if (err == -EBUSY && cpu_profile_join(cpu_agg_add, cpu_agg, 1) == 0) {
        cpu_mode = CPU_GUEST;
        return;
    }
    static int said;
    if (err != -EBUSY && !said) {
        said = 1;
        log_info("push: no CPU profile (%s)",
                 err == -EAGAIN ? "no free signal" : log_errtext(-err));
    }
}

void push_collect_tick(void)
{
    if (cpu_mode == CPU_OWNER)
        cpu_profile_drain(cpu_agg_add, cpu_agg);
    else if (cpu_mode == CPU_GUEST && !cpu_profile_joined(cpu_agg))
        cpu_mode = CPU_NONE; /* its owner stopped: start ours */
    if (cpu_mode == CPU_NONE)
        cpu_attach();
}

/* The window's CPU profile into b; a new aggregate for the next one. */
static int add_cpu(struct otlp_batch *b, const struct write_options *o,
                   int final)
{
    if (!cpu_agg)
        return 0;
    if (cpu_mode == CPU_OWNER) {
        if (final) {
            cpu_profile_stop(cpu_agg_add, cpu_agg);
        } else {
            cpu_profile_drain(cpu_agg_add, cpu_agg);
        }
    } else if (cpu_mode == CPU_GUEST) {
        cpu_profile_leave(cpu_agg);
    }
    struct pbuf gz = {0};
    int err = cpu_write(cpu_agg, 0, o, &gz);
    if (err == 0)
        err = otlp_batch_add(b, &gz, NULL);
    pbuf_free(&gz);
    if (final && cpu_mode == CPU_OWNER)
        cpu_profile_release();
    cpu_agg_free(cpu_agg);
    cpu_agg = NULL;
    if (final) {
        cpu_mode = CPU_NONE;
        return err;
    }
    /* The next window: the same profile goes on (ours), or we join the
     * running one again. */
    cpu_agg = cpu_agg_new();
    if (cpu_mode == CPU_GUEST &&
        (!cpu_agg || cpu_profile_join(cpu_agg_add, cpu_agg, 1) != 0))
        cpu_mode = CPU_NONE;
    if (cpu_mode == CPU_OWNER && !cpu_agg) {
        cpu_profile_stop(NULL, NULL);
        cpu_profile_release();
        cpu_mode = CPU_NONE;
    }
    return err;
}

/* ---- tables ------------------------------------------------------------------ */

static int snapshot_copy(const struct stack_snapshot *s,
                         struct stack_snapshot *out)
{
    *out = *s;
    out->entries = real_malloc((s->n ? s->n : 1) * sizeof *s->entries);
    out->values =
        real_malloc((s->n ? s->n : 1) * (size_t)s->nvalues * sizeof *s->values);
    if (!out->entries || !out->values) {
        real_free(out->entries);
        real_free(out->values);
        memset(out, 0, sizeof *out);
        return -ENOMEM;
    }
    memcpy(out->entries, s->entries, s->n * sizeof *s->entries);
    memcpy(out->values, s->values, s->n * (size_t)s->nvalues * sizeof *s->values);
    return 0;
}

/* now - *prev into delta; *prev becomes now (taken over). */
static int delta_of(struct stack_snapshot *now, struct stack_snapshot *prev,
                    struct stack_snapshot *delta)
{
    int err = snapshot_copy(now, delta);
    if (err) {
        stack_snapshot_free(now);
        return err;
    }
    if (prev->entries)
        stack_snapshot_subtract(delta, prev);
    stack_snapshot_free(prev);
    *prev = *now;
    return 0;
}

static const char *const inuse_types[] = {"inuse_objects", "inuse_space",
                                          NULL};
static const char *const alloc_types[] = {"alloc_objects", "alloc_space",
                                          NULL};

static int add_heap(struct otlp_batch *b, const struct write_options *o)
{
    if (!heap_buckets || opt_heap_rate <= 0)
        return 0;
    struct stack_snapshot now, delta;
    struct heap_record *recs;
    size_t n;
    if (heap_records_take(0, &recs, &n, &now) != 0)
        return -ENOMEM;
    struct pbuf gz = {0};
    int err = heap_write("heap", recs, n, NULL, o, &gz);
    real_free(recs);
    if (err == 0)
        err = otlp_batch_add(b, &gz, inuse_types);
    pbuf_free(&gz);
    if (delta_of(&now, &prev_heap, &delta) != 0)
        return -ENOMEM;
    if (heap_records_of(&delta, 1, 0, NULL, 0, 0, &recs, &n) == 0) {
        int e2 = heap_write("allocs", recs, n, NULL, o, &gz);
        if (e2 == 0)
            e2 = otlp_batch_add(b, &gz, alloc_types);
        if (err == 0)
            err = e2;
        real_free(recs);
        pbuf_free(&gz);
    }
    stack_snapshot_free(&delta);
    return err < 0 ? err : 0;
}

static int add_contention(struct otlp_batch *b, const struct write_options *o,
                          struct stack_table *t, struct stack_snapshot *prev,
                          int is_mutex)
{
    if (!t)
        return 0;
    struct stack_snapshot now, delta;
    if (stack_table_snapshot(t, &now) != 0 || delta_of(&now, prev, &delta))
        return -ENOMEM;
    struct pbuf gz = {0};
    int err = contention_write(is_mutex, &delta, o, &gz);
    if (err == 0)
        err = otlp_batch_add(b, &gz, NULL);
    pbuf_free(&gz);
    stack_snapshot_free(&delta);
    return err < 0 ? err : 0;
}

static int add_custom(struct otlp_batch *b, const struct write_options *o)
{
    size_t count = custom_profile_count();
    if (count > nprev_custom) {
        struct stack_snapshot *p =
            real_realloc(prev_custom, count * sizeof *prev_custom);
        if (!p)
            return -ENOMEM;
        memset(p + nprev_custom, 0, (count - nprev_custom) * sizeof *p);
        prev_custom = p;
        nprev_custom = count;
    }
    int err = 0;
    for (size_t i = 0; i < count; i++) {
        struct pprof_profile *prof = custom_profile_at(i);
        struct stack_snapshot now, delta;
        if (!prof || stack_table_snapshot(custom_profile_stacks(prof), &now) ||
            delta_of(&now, &prev_custom[i], &delta))
            continue;
        struct stack_record *recs =
            real_malloc((delta.n ? delta.n : 1) * sizeof *recs);
        struct pbuf gz = {0};
        if (recs) {
            size_t n = count_records_from_snapshot(&delta, recs);
            if (count_write(custom_profile_name(prof), recs, n, o, &gz) == 0)
                err = otlp_batch_add(b, &gz, NULL);
        }
        real_free(recs);
        pbuf_free(&gz);
        stack_snapshot_free(&delta);
    }
    return err < 0 ? err : 0;
}

/* ---- the request ------------------------------------------------------------- */

/* *prev becomes the table's counters now. */
static void baseline(struct stack_table *t, struct stack_snapshot *prev)
{
    struct stack_snapshot now;
    if (!t || stack_table_snapshot(t, &now) != 0)
        return;
    stack_snapshot_free(prev);
    *prev = now;
}

void push_collect_start(void)
{
    /* The first window's deltas start here, not at the process's start. */
    window_start = agent_now_ns();
    baseline(heap_buckets, &prev_heap);
    baseline(block_table, &prev_block);
    baseline(mutex_table, &prev_mutex);
    size_t count = custom_profile_count();
    prev_custom = real_calloc(count ? count : 1, sizeof *prev_custom);
    nprev_custom = prev_custom ? count : 0;
    for (size_t i = 0; i < nprev_custom; i++) {
        struct pprof_profile *prof = custom_profile_at(i);
        if (prof)
            baseline(custom_profile_stacks(prof), &prev_custom[i]);
    }
    push_collect_tick();
}

int push_collect_interval(int final, struct pbuf *out)
{
    int64_t end = agent_now_ns();
    struct write_options o = {.time_nanos = window_start,
                              .duration_nanos = end - window_start};
    window_start = end;
    struct otlp_batch *b = otlp_batch_new();
    if (!b)
        return -ENOMEM;
    add_cpu(b, &o, final);
    add_heap(b, &o);
    add_contention(b, &o, block_table, &prev_block, 0);
    add_contention(b, &o, mutex_table, &prev_mutex, 1);
    add_custom(b, &o);
    struct otlp_kv res[PUSH_MAX_ATTRS + 8];
    char bufs[6][1024];
    size_t n = push_resource(res, PUSH_MAX_ATTRS + 8, bufs);
    int err = otlp_batch_write(b, res, n, "pprofagent", PUSH_AGENT_VERSION,
                               out);
    otlp_batch_free(b);
    return err;
}

FORK_PATH void push_collect_fork_child(void)
{
    /* The parent's profile and counters: not this child's. Its first
     * window starts with its push. */
    FORK_SET(cpu_mode, CPU_NONE);
    FORK_SET(cpu_agg, NULL);
    fork_zero(&prev_heap, sizeof prev_heap);
    fork_zero(&prev_block, sizeof prev_block);
    fork_zero(&prev_mutex, sizeof prev_mutex);
    FORK_SET(prev_custom, NULL);
    FORK_SET(nprev_custom, 0);
}

void push_collect_stop(void)
{
    stack_snapshot_free(&prev_heap);
    stack_snapshot_free(&prev_block);
    stack_snapshot_free(&prev_mutex);
    for (size_t i = 0; i < nprev_custom; i++)
        stack_snapshot_free(&prev_custom[i]);
    real_free(prev_custom);
    prev_custom = NULL;
    nprev_custom = 0;
}
