/*
 * Heap profiles (heap, allocs): the sampled (stack, size) buckets, as a
 * proto shaped as Go's with every count unsampled, or as Go's debug=1 text
 * with raw counts. Runs on the agent's server threads only.
 *
 * Unsampling. An allocation of n bytes was sampled with probability
 * p = 1 - exp(-(n + 1) / rate) (agent/heap/heap.h), so each raw count of a
 * bucket is divided by p (heap_scale, agent/heap/heap_table.c, the one copy
 * of the rule): E[count / p] is the true count. Go's formula is
 * the same with n instead of n + 1, because Go's sampler counts n bytes;
 * the agent counts n + 1 so that malloc(0) can be sampled, and must divide
 * by the probability it really used. Values are rounded to the nearest
 * integer (Go truncates, which biases every bucket down by half a unit).
 */
#include "encoder/encoder.h"
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/heap/fmath.h"
#include "agent/heap/heap.h"
#include "agent/log.h"
#include "agent/stacks/stack_table.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t scaled(int64_t v, double scale)
{
    double x = (double)v * scale; /* rounded half away from zero */
    return (int64_t)(x >= 0 ? x + 0.5 : x - 0.5);
}

/* Go's inuse_objects, inuse_space, alloc_objects, alloc_space of a
 * record, raw (scale 1) or unsampled. */
static void heap_values(const struct heap_record *r, double scale,
                        int64_t v[4])
{
    int64_t inuse = r->alloc_objects - r->free_objects;
    v[0] = scaled(r->alloc_objects, scale);
    v[1] = scaled(r->alloc_objects * r->size, scale);
    v[2] = scaled(inuse, scale);
    v[3] = scaled(inuse * r->size, scale);
}

int heap_totals(const struct heap_record *recs, size_t n, long rate,
                int64_t *inuse_bytes, int64_t *inuse_objects)
{
    *inuse_bytes = *inuse_objects = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t v[4];
        heap_values(&recs[i], heap_scale(recs[i].size, rate), v);
        *inuse_objects += v[2];
        *inuse_bytes += v[3];
    }
    return 0;
}

/* The table's own statistics, as the comment (sep " ") or the text's
 * trailer (sep "\n# ") says them. */
static void describe(char *buf, size_t size, const char *sep)
{
    struct heap_stats st;
    heap_table_stats(&st);
    log_snprintf(buf, size,
                 "pprofagent heap: rate=%ld%ssampled=%ld%slive=%ld%s"
                 "lost=%ld (samples not recorded for lack of table room)",
                 opt_heap_rate, sep, st.sampled, sep, st.live, sep, st.lost);
}

static int heap_proto(const char *name, const struct heap_record *recs,
                      size_t n, const char *extra,
                      const struct write_options *o, struct pbuf *out)
{
    long rate = opt_heap_rate;
    struct stack_record *sr = real_malloc((n ? n : 1) * sizeof *sr);
    struct profile *p = profile_new();
    if (!sr || !p) {
        real_free(sr);
        profile_free(p);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        sr[i] = (struct stack_record){
            .pcs = recs[i].pcs,
            .depth = recs[i].depth,
            .labels = recs[i].labels,
            .bytes = recs[i].size,
            .age = recs[i].age,
        };
        heap_values(&recs[i], heap_scale(recs[i].size, rate), sr[i].values);
    }
    char info[400], comment[700];
    describe(info, sizeof info, " ");
    log_snprintf(comment, sizeof comment, "%s%s%s", info, extra ? " " : "",
                 extra ? extra : "");
    /* No allocation reaches the agent: the profile says why it is empty
     * (Go's carry no comment otherwise). */
    if (heap_hidden_by[0]) {
        char why[400];
        heap_hidden_text(why, sizeof why);
        profile_comment(p, why);
        log_snprintf(comment + strlen(comment), sizeof comment - strlen(comment),
                     "; %s", why);
    }
    profile_sample_type(p, "alloc_objects", "count");
    profile_sample_type(p, "alloc_space", "bytes");
    profile_sample_type(p, "inuse_objects", "count");
    profile_sample_type(p, "inuse_space", "bytes");
    profile_period(p, "space", "bytes", rate);
    /* pprof shows the last type (inuse_space) unless told otherwise. */
    if (strcmp(name, "allocs") == 0)
        profile_default_sample_type(p, "alloc_space");
    profile_time(p, o->time_nanos, o->duration_nanos);
    /* The table's statistics are the agent's, not the profile's: Go's
     * profiles carry no comment. */
    log_debug("%s profile: %s", name, comment);
    notes_set(strcmp(name, "allocs") == 0 ? "heap" : name, comment);
    int err = stack_records_proto(p, sr, n, 4, out);
    profile_free(p);
    real_free(sr);
    return err;
}

static void heap_headline(const struct stack_record *r, struct pbuf *out)
{
    pbuf_printf(out, "%lld: %lld [%lld: %lld]", (long long)r->values[0],
                (long long)r->values[1], (long long)r->values[2],
                (long long)r->values[3]);
}

/* Text records carry raw values in Go's order: in-use objects and bytes,
 * then allocated objects and bytes; largest in-use bytes first, then
 * allocated bytes. */
static const struct stack_text_form heap_text_form = {
    .keys = {1, 3}, .nkeys = 2, .headline = heap_headline};

static int heap_text(const struct heap_record *recs, size_t n,
                     const char *extra, struct pbuf *out)
{
    long rate = opt_heap_rate;
    struct stack_record *sr = real_malloc((n ? n : 1) * sizeof *sr);
    if (!sr)
        return -ENOMEM;
    int64_t t[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        int64_t v[4];
        heap_values(&recs[i], 1.0, v);
        sr[i] = (struct stack_record){
            .pcs = recs[i].pcs,
            .depth = recs[i].depth,
            .values = {v[2], v[3], v[0], v[1]},
        };
        for (int k = 0; k < 4; k++)
            t[k] += sr[i].values[k];
    }
    pbuf_printf(out, "heap profile: %lld: %lld [%lld: %lld] @ heap/%ld\n",
                (long long)t[0], (long long)t[1], (long long)t[2],
                (long long)t[3], 2 * rate);
    int err = stack_records_text(sr, n, &heap_text_form, out);
    real_free(sr);
    char info[400];
    describe(info, sizeof info, "\n# ");
    pbuf_printf(out, "# %s%s%s\n", info, extra ? "\n# " : "",
                extra ? extra : "");
    return err ? err : out->oom ? -ENOMEM : 0;
}

int heap_write(const char *name, const struct heap_record *recs, size_t n,
               const char *extra, const struct write_options *o,
               struct pbuf *out)
{
    if (o->debug != 0)
        return heap_text(recs, n, extra, out);
    return heap_proto(name, recs, n, extra, o, out);
}

int heap_records_take(int by_age, struct heap_record **out, size_t *n,
                      struct stack_snapshot *snap)
{
    /* A full proto profile labels live samples with their age: the live
     * copy is taken before the counters, so each of its samples is
     * already counted there. */
    struct heap_live *live = NULL;
    size_t nlive = 0;
    if (by_age && heap_table_live(&live, &nlive) != 0)
        by_age = 0;
    int64_t now = heap_table_now_ns();
    if (stack_table_snapshot(heap_buckets, snap) != 0) {
        real_free(live);
        return -ENOMEM;
    }
    int err = heap_records_of(snap, 0, by_age, live, nlive, now, out, n);
    real_free(live);
    if (err)
        stack_snapshot_free(snap);
    return err;
}

int heap_records_of(const struct stack_snapshot *snap, int delta, int by_age,
                    struct heap_live *live, size_t nlive, int64_t now_ns,
                    struct heap_record **out, size_t *n)
{
    size_t room = snap->n ? snap->n : 1;
    struct heap_record *recs = real_malloc(room * sizeof *recs);
    struct heap_record *split =
        by_age ? real_malloc(room * (HEAP_AGE_BUCKETS + 1) * sizeof *split) : NULL;
    if (!recs || (by_age && !split)) {
        real_free(recs);
        real_free(split);
        return -ENOMEM;
    }
    *n = heap_records_from_snapshot(snap, delta, recs);
    if (by_age) {
        *n = heap_records_by_age(recs, *n, live, nlive, now_ns, split);
        real_free(recs);
        recs = split;
    }
    *out = recs;
    return 0;
}

size_t heap_records_from_snapshot(const struct stack_snapshot *snap,
                                  int delta, struct heap_record *out)
{
    size_t n = 0;
    for (size_t i = 0; i < snap->n; i++) {
        const int64_t *v = &snap->values[i * (size_t)snap->nvalues];
        struct heap_record *h = &out[n];
        h->pcs = snap->entries[i]->pcs;
        h->depth = snap->entries[i]->depth;
        h->size = heap_key_size(snap->entries[i]->key);
        h->labels = heap_key_labels(snap->entries[i]->key);
        h->bucket = snap->entries[i];
        h->age = NULL;
        h->alloc_objects = v[HEAP_ALLOC_OBJECTS];
        h->free_objects = v[HEAP_FREE_OBJECTS];
        /* The counters are read one after the other while threads go on:
         * a free counted after its allocation was read would show as a
         * negative in-use count in a full profile. */
        if (!delta && h->free_objects > h->alloc_objects)
            h->free_objects = h->alloc_objects;
        if (h->alloc_objects == 0 && h->free_objects == 0)
            continue;
        n++;
    }
    return n;
}

/* ---- ages of live samples -------------------------------------------------- */

static const int64_t age_bounds_s[HEAP_AGE_BUCKETS] = {0, 60, 600, 3600};
static const char *const age_labels[HEAP_AGE_BUCKETS] = {"0-1m", "1m-10m",
                                                         "10m-1h", "1h+"};

static int age_bucket(int64_t age_ns)
{
    int b = 0;
    while (b + 1 < HEAP_AGE_BUCKETS &&
           age_ns >= age_bounds_s[b + 1] * 1000000000LL)
        b++;
    return b;
}

const char *heap_age_label(int64_t age_ns)
{
    return age_labels[age_bucket(age_ns)];
}

/* Orders live samples by bucket, then newest first, so that each bucket's
 * age buckets come in order. */
static int by_bucket_then_born(const void *a, const void *b)
{
    const struct heap_live *x = a, *y = b;
    int c = ORDER((uintptr_t)x->bucket, (uintptr_t)y->bucket);
    return c ? c : ORDER(y->born_ns, x->born_ns);
}

static void record_of(const struct stack_entry *e, struct heap_record *h)
{
    memset(h, 0, sizeof *h);
    h->pcs = e->pcs;
    h->depth = e->depth;
    h->size = heap_key_size(e->key);
    h->labels = heap_key_labels(e->key);
    h->bucket = e;
}

/* The first live sample of bucket in live (sorted), or nlive. */
static size_t first_of(const struct heap_live *live, size_t nlive,
                       const void *bucket)
{
    size_t lo = 0, hi = nlive;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)live[mid].bucket < (uintptr_t)bucket)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t heap_records_by_age(const struct heap_record *in, size_t n,
                           struct heap_live *live, size_t nlive,
                           int64_t now_ns, struct heap_record *out)
{
    if (nlive > 0) /* live may be NULL when nothing is live */
        qsort(live, nlive, sizeof *live, by_bucket_then_born);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const struct heap_record *r = &in[i];
        int64_t counts[HEAP_AGE_BUCKETS] = {0};
        for (size_t j = first_of(live, nlive, r->bucket);
             j < nlive && live[j].bucket == r->bucket; j++)
            counts[age_bucket(now_ns - live[j].born_ns)]++;
        /* The bucket itself keeps every allocation count and no in-use:
         * its alloc_* series stays cumulative from scrape to scrape, as
         * continuous profilers need. The live copy is the truth of what
         * is in use (taken first, so each of its samples is counted). */
        out[m] = *r;
        out[m].free_objects = r->alloc_objects;
        out[m].age = NULL;
        m++;
        /* In use, per age bucket: no allocation count (in-use = alloc -
         * free, so free is negative here), so that such a series may
         * vanish when its blocks are freed without any delta going back. */
        for (int b = 0; b < HEAP_AGE_BUCKETS; b++) {
            if (!counts[b])
                continue;
            out[m] = *r;
            out[m].alloc_objects = 0;
            out[m].free_objects = -counts[b];
            out[m].age = age_labels[b];
            m++;
        }
    }
    return m;
}

size_t heap_records_min_age(struct heap_live *live, size_t nlive,
                            int64_t now_ns, int64_t min_age_ns, int by_age,
                            struct heap_record *out)
{
    if (nlive > 0) /* live may be NULL when nothing is live */
        qsort(live, nlive, sizeof *live, by_bucket_then_born);
    size_t m = 0;
    for (size_t j = 0; j < nlive; j++) {
        int64_t age = now_ns - live[j].born_ns;
        if (age < min_age_ns)
            continue;
        const char *label = by_age ? heap_age_label(age) : NULL;
        if (m > 0 && out[m - 1].bucket == live[j].bucket &&
            out[m - 1].age == label) {
            out[m - 1].alloc_objects++;
            continue;
        }
        record_of(live[j].bucket, &out[m]);
        out[m].alloc_objects = 1;
        out[m].age = label;
        m++;
    }
    return m;
}

size_t heap_records_subtract(struct heap_record *later, size_t nlater,
                             const struct heap_record *earlier,
                             size_t nearlier)
{
    /* Both are in bucket order (heap_records_min_age sorts by bucket). */
    size_t m = nlater, j = 0;
    for (size_t i = 0; i < nearlier; i++) {
        while (j < nlater &&
               (uintptr_t)later[j].bucket < (uintptr_t)earlier[i].bucket)
            j++;
        if (j < nlater && later[j].bucket == earlier[i].bucket) {
            later[j].alloc_objects -= earlier[i].alloc_objects;
            later[j].free_objects -= earlier[i].free_objects;
        } else {
            later[m] = earlier[i];
            later[m].alloc_objects = -earlier[i].alloc_objects;
            later[m].free_objects = -earlier[i].free_objects;
            m++;
        }
    }
    return m;
}

int heap_records_take_min_age(int64_t min_age_ns, int by_age,
                              struct heap_record **out, size_t *n)
{
    struct heap_live *live = NULL;
    size_t nlive = 0;
    if (heap_table_live(&live, &nlive) != 0)
        return -ENOMEM;
    int64_t now = heap_table_now_ns();
    /* Twice the room: a delta appends the earlier copy's leftovers. */
    *out = real_malloc((2 * nlive + 1) * sizeof **out);
    if (!*out) {
        real_free(live);
        return -ENOMEM;
    }
    *n = heap_records_min_age(live, nlive, now, min_age_ns, by_age, *out);
    real_free(live);
    return 0;
}

int heap_records_delta(struct heap_record **later, size_t *nlater,
                       const struct heap_record *earlier, size_t nearlier)
{
    struct heap_record *both =
        real_realloc(*later, (*nlater + nearlier + 1) * sizeof **later);
    if (!both)
        return -ENOMEM;
    *later = both;
    *nlater = heap_records_subtract(both, *nlater, earlier, nearlier);
    return 0;
}

int heap_records_take_peak(int reset, struct heap_record **out, size_t *n,
                           struct stack_snapshot *snap, int64_t *time_ns,
                           char *extra, size_t extra_size)
{
    if (stack_table_snapshot(heap_buckets, snap) != 0)
        return -ENOMEM;
    struct heap_peak_info info;
    heap_peak_apply(snap, &info, reset);
    *out = real_malloc((snap->n ? snap->n : 1) * sizeof **out);
    if (!*out) {
        stack_snapshot_free(snap);
        return -ENOMEM;
    }
    *n = heap_records_from_snapshot(snap, 0, *out);
    int64_t shown = 0;
    for (size_t i = 0; i < *n; i++)
        shown += scaled((*out)[i].alloc_objects * (*out)[i].size,
                        heap_scale((*out)[i].size, opt_heap_rate));
    *time_ns = info.time_ns;
    log_snprintf(extra, extra_size,
                 "peak: inuse=%lld high_water=%lld highs=%ld "
                 "since_unix_ms=%lld (0: start)%s",
                 (long long)shown, (long long)info.high_water_bytes,
                 info.highs, (long long)(info.since_ns / 1000000),
                 reset ? " (reset: a new period starts now)" : "");
    return 0;
}
