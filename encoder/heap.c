/*
 * Heap profiles (heap, allocs): the sampled (stack, size) buckets, as a
 * proto shaped as Go's with every count unsampled, or as Go's debug=1 text
 * with raw counts. Runs on the agent's server threads only.
 *
 * Unsampling. An allocation of n bytes was sampled with probability
 * p = 1 - exp(-(n + 1) / rate) (agent/heap.h), so each raw count of a
 * bucket is divided by p: E[count / p] is the true count. Go's formula is
 * the same with n instead of n + 1, because Go's sampler counts n bytes;
 * the agent counts n + 1 so that malloc(0) can be sampled, and must divide
 * by the probability it really used. Values are rounded to the nearest
 * integer (Go truncates, which biases every bucket down by half a unit).
 */
#include "encoder/encoder.h"

#include "agent/heap.h"
#include "agent/labels.h"
#include "agent/symbols.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

double heap_scale(int64_t size, long rate)
{
    if (rate <= 1)
        return 1.0;
    return -1.0 / expm1(-((double)size + 1.0) / (double)rate);
}

static int64_t scaled(int64_t v, double scale)
{
    return (int64_t)llround((double)v * scale);
}

int heap_profile_proto(const struct heap_record *recs, size_t n, long rate,
                       const char *default_type, int64_t time_nanos,
                       int64_t duration_nanos, const char *comment,
                       struct pbuf *out)
{
    struct profile *p = profile_new();
    if (!p)
        return -ENOMEM;
    profile_sample_type(p, "alloc_objects", "count");
    profile_sample_type(p, "alloc_space", "bytes");
    profile_sample_type(p, "inuse_objects", "count");
    profile_sample_type(p, "inuse_space", "bytes");
    profile_period(p, "space", "bytes", rate);
    if (default_type)
        profile_default_sample_type(p, default_type);
    profile_time(p, time_nanos, duration_nanos);
    if (comment)
        profile_comment(p, comment);

    struct stack_encoder *se = stacks_begin(p);
    if (!se) {
        profile_free(p);
        return -ENOMEM;
    }
    uint64_t ids[256];
    for (size_t i = 0; i < n; i++) {
        const struct heap_record *r = &recs[i];
        if (r->alloc_objects == 0 && r->free_objects == 0)
            continue;
        double scale = heap_scale(r->size, rate);
        int64_t inuse = r->alloc_objects - r->free_objects;
        int64_t values[4] = {
            scaled(r->alloc_objects, scale),
            scaled(r->alloc_objects * r->size, scale),
            scaled(inuse, scale),
            scaled(inuse * r->size, scale),
        };
        size_t depth = (size_t)r->depth;
        if (depth > sizeof ids / sizeof ids[0])
            depth = sizeof ids / sizeof ids[0];
        size_t nids = stacks_locations(se, r->pcs, depth, ids);
        struct profile_label labels[2 + LABELS_MAX_PAIRS];
        size_t nlabels = 0;
        if (r->size)
            labels[nlabels++] = (struct profile_label){"bytes", NULL, r->size,
                                                       NULL};
        if (r->age)
            labels[nlabels++] = (struct profile_label){"age", r->age, 0,
                                                       NULL};
        nlabels += labels_to_profile(r->labels, labels + nlabels);
        profile_sample(p, ids, nids, values, 4, labels, nlabels);
    }
    stacks_end(se);
    int err = profile_write_gzip(p, out);
    profile_free(p);
    return err;
}

static int by_inuse_desc(const void *a, const void *b)
{
    const struct heap_record *x = a, *y = b;
    int64_t bx = (x->alloc_objects - x->free_objects) * x->size;
    int64_t by = (y->alloc_objects - y->free_objects) * y->size;
    if (bx != by)
        return bx > by ? -1 : 1;
    int64_t ax = x->alloc_objects * x->size, ay = y->alloc_objects * y->size;
    if (ax != ay)
        return ax > ay ? -1 : 1;
    return 0;
}

/* The "@" list carries return addresses, as Go prints them. */
static uintptr_t raw_address(uintptr_t pc)
{
    return pc < FRAME_PSEUDO_MAX ? pc : pc + 1;
}

int heap_profile_text(const struct heap_record *recs, size_t n, long rate,
                      const char *trailer, struct pbuf *out)
{
    struct heap_record *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return -ENOMEM;
    memcpy(sorted, recs, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_inuse_desc);

    int64_t t[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        int64_t inuse = sorted[i].alloc_objects - sorted[i].free_objects;
        t[0] += inuse;
        t[1] += inuse * sorted[i].size;
        t[2] += sorted[i].alloc_objects;
        t[3] += sorted[i].alloc_objects * sorted[i].size;
    }
    pbuf_printf(out, "heap profile: %lld: %lld [%lld: %lld] @ heap/%ld\n",
                (long long)t[0], (long long)t[1], (long long)t[2],
                (long long)t[3], 2 * rate);

    struct profile *p = profile_new();
    struct stack_encoder *se = p ? stacks_begin(p) : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct heap_record *r = &sorted[i];
        if (r->alloc_objects == 0 && r->free_objects == 0)
            continue;
        int64_t inuse = r->alloc_objects - r->free_objects;
        pbuf_printf(out, "%lld: %lld [%lld: %lld] @", (long long)inuse,
                    (long long)(inuse * r->size), (long long)r->alloc_objects,
                    (long long)(r->alloc_objects * r->size));
        for (int f = 0; f < r->depth; f++)
            if (!stacks_hidden(r->pcs[f], (size_t)f))
                pbuf_printf(out, " %#lx",
                            (unsigned long)raw_address(r->pcs[f]));
        if (r->depth == 0)
            pbuf_puts(out, " 0x0");
        pbuf_puts(out, "\n");
        for (int f = 0; se && f < r->depth; f++)
            if (!stacks_hidden(r->pcs[f], (size_t)f))
                stacks_describe(se, r->pcs[f], out);
        pbuf_puts(out, "\n");
    }
    if (se)
        stacks_end(se);
    profile_free(p);
    free(sorted);
    if (trailer)
        pbuf_puts(out, trailer);
    return out->oom ? -ENOMEM : 0;
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
    if (x->bucket != y->bucket)
        return (uintptr_t)x->bucket < (uintptr_t)y->bucket ? -1 : 1;
    if (x->born_ns != y->born_ns)
        return x->born_ns > y->born_ns ? -1 : 1;
    return 0;
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
