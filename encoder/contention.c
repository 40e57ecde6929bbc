/*
 * Contention profiles (block, mutex): stacks with a count and a delay, as a
 * proto shaped as Go's (contentions/count, delay/nanoseconds, period type
 * contentions/count, period 1) or as Go's debug=1 text ("--- contention:"
 * or "--- mutex:", cycles/second, records sorted by delay). Runs on the
 * agent's server threads only.
 */
#include "encoder/encoder.h"

#include "agent/symbols.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int contention_profile_proto(const struct contention_record *recs, size_t n,
                             int64_t time_nanos, int64_t duration_nanos,
                             struct pbuf *out)
{
    struct profile *p = profile_new();
    if (!p)
        return -ENOMEM;
    profile_sample_type(p, "contentions", "count");
    profile_sample_type(p, "delay", "nanoseconds");
    profile_period(p, "contentions", "count", 1);
    profile_time(p, time_nanos, duration_nanos);

    struct stack_encoder *se = stacks_begin(p);
    if (!se) {
        profile_free(p);
        return -ENOMEM;
    }
    uint64_t ids[256];
    for (size_t i = 0; i < n; i++) {
        if (recs[i].count == 0 && recs[i].delay == 0)
            continue;
        size_t depth = (size_t)recs[i].depth;
        if (depth > sizeof ids / sizeof ids[0])
            depth = sizeof ids / sizeof ids[0];
        size_t nids = stacks_locations(se, recs[i].pcs, depth, ids);
        int64_t values[2] = {recs[i].count, recs[i].delay};
        profile_sample(p, ids, nids, values, 2, NULL, 0);
    }
    stacks_end(se);
    int err = profile_write_gzip(p, out);
    profile_free(p);
    return err;
}

static int by_delay_desc(const void *a, const void *b)
{
    const struct contention_record *x = a, *y = b;
    if (x->delay != y->delay)
        return x->delay > y->delay ? -1 : 1;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return memcmp(x->pcs, y->pcs, (size_t)x->depth * sizeof *x->pcs);
}

int contention_profile_text(const char *kind, long sampling_period,
                            const struct contention_record *recs, size_t n,
                            struct pbuf *out)
{
    struct contention_record *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return -ENOMEM;
    memcpy(sorted, recs, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_delay_desc);

    /* Delays are kept in ns: one "cycle" is one nanosecond. */
    pbuf_printf(out, "--- %s:\ncycles/second=1000000000\n", kind);
    if (sampling_period > 0)
        pbuf_printf(out, "sampling period=%ld\n", sampling_period);

    struct profile *p = profile_new();
    struct stack_encoder *se = p ? stacks_begin(p) : NULL;
    for (size_t i = 0; i < n; i++) {
        if (sorted[i].count == 0 && sorted[i].delay == 0)
            continue;
        pbuf_printf(out, "%lld %lld @", (long long)sorted[i].delay,
                    (long long)sorted[i].count);
        for (int f = 0; f < sorted[i].depth; f++) {
            uintptr_t pc = sorted[i].pcs[f];
            if (stacks_hidden(pc, (size_t)f))
                continue;
            /* The "@" list carries return addresses, as Go prints them. */
            pbuf_printf(out, " %#lx",
                        (unsigned long)(pc < FRAME_PSEUDO_MAX ? pc : pc + 1));
        }
        if (sorted[i].depth == 0)
            pbuf_puts(out, " 0x0");
        pbuf_puts(out, "\n");
        for (int f = 0; se && f < sorted[i].depth; f++)
            if (!stacks_hidden(sorted[i].pcs[f], (size_t)f))
                stacks_describe(se, sorted[i].pcs[f], out);
        pbuf_puts(out, "\n");
    }
    if (se)
        stacks_end(se);
    profile_free(p);
    free(sorted);
    return out->oom ? -ENOMEM : 0;
}
