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
        struct profile_label labels[1 + LABELS_MAX_PAIRS];
        size_t nlabels = 0;
        if (r->size)
            labels[nlabels++] = (struct profile_label){"bytes", NULL, r->size,
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
