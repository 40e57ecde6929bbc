/*
 * Count profiles (threadcreate, goroutine, custom profiles): every distinct
 * stack with the number of entries that share it, as a proto or as Go's
 * debug=1 text. Runs on the agent's server threads only.
 */
#include "encoder/encoder.h"

#include "agent/labels.h"
#include "agent/symbols.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int count_profile_proto(const char *name, const struct count_record *recs,
                        size_t n, int64_t time_nanos, int64_t duration_nanos,
                        struct pbuf *out)
{
    struct profile *p = profile_new();
    if (!p)
        return -ENOMEM;
    profile_sample_type(p, name, "count");
    profile_period(p, name, "count", 1);
    profile_time(p, time_nanos, duration_nanos);

    struct stack_encoder *se = stacks_begin(p);
    if (!se) {
        profile_free(p);
        return -ENOMEM;
    }
    uint64_t ids[256];
    for (size_t i = 0; i < n; i++) {
        if (recs[i].count == 0)
            continue;
        size_t depth = (size_t)recs[i].depth;
        if (depth > sizeof ids / sizeof ids[0])
            depth = sizeof ids / sizeof ids[0];
        size_t nids = stacks_locations(se, recs[i].pcs, depth, ids);
        struct profile_label labels[LABELS_MAX_PAIRS];
        size_t nlabels = labels_to_profile(recs[i].labels, labels);
        profile_sample(p, ids, nids, &recs[i].count, 1, labels, nlabels);
    }
    stacks_end(se);
    int err = profile_write_gzip(p, out);
    profile_free(p);
    return err;
}

static int by_count_desc(const void *a, const void *b)
{
    const struct count_record *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    int c = memcmp(x->pcs, y->pcs, (size_t)x->depth * sizeof *x->pcs);
    if (c)
        return c;
    return (x->labels > y->labels) - (x->labels < y->labels);
}

/* The "@" list carries return addresses, as Go prints them; a location
 * address is the call site, one less. Pseudo frames are printed as they
 * are so the line still parses. */
static uintptr_t raw_address(uintptr_t pc)
{
    return pc < FRAME_PSEUDO_MAX ? pc : pc + 1;
}

int count_profile_text(const char *name, const struct count_record *recs,
                       size_t n, struct pbuf *out)
{
    struct count_record *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return -ENOMEM;
    memcpy(sorted, recs, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, by_count_desc);

    int64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += sorted[i].count;
    pbuf_printf(out, "%s profile: total %lld\n", name, (long long)total);

    struct profile *p = profile_new();
    struct stack_encoder *se = p ? stacks_begin(p) : NULL;
    for (size_t i = 0; i < n; i++) {
        if (sorted[i].count == 0)
            continue;
        pbuf_printf(out, "%lld @", (long long)sorted[i].count);
        for (int f = 0; f < sorted[i].depth; f++)
            if (!stacks_hidden(sorted[i].pcs[f], (size_t)f))
                pbuf_printf(out, " %#lx",
                            (unsigned long)raw_address(sorted[i].pcs[f]));
        if (sorted[i].depth == 0)
            pbuf_puts(out, " 0x0");
        pbuf_puts(out, "\n");
        labels_put_text(out, "# labels: ", sorted[i].labels);
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
