/*
 * Count profiles (threadcreate, goroutine, custom profiles): every distinct
 * stack with the number of entries that share it, as a proto or as Go's
 * debug=1 text. Runs on the agent's server threads only.
 */
#include "encoder/encoder.h"

#include "agent/stacks/stack_table.h"

#include <errno.h>

size_t count_records_from_snapshot(const struct stack_snapshot *snap,
                                   struct stack_record *out)
{
    size_t n = 0;
    for (size_t i = 0; i < snap->n; i++) {
        int64_t count = snap->values[i * (size_t)snap->nvalues];
        if (count == 0)
            continue;
        out[n] = (struct stack_record){
            .pcs = snap->entries[i]->pcs,
            .depth = snap->entries[i]->depth,
            .values = {count},
        };
        n++;
    }
    return n;
}

static void count_headline(const struct stack_record *r, struct pbuf *out)
{
    pbuf_printf(out, "%lld", (long long)r->values[0]);
}

/* Most frequent first. */
static const struct stack_text_form count_text = {
    .keys = {0}, .nkeys = 1, .tiebreak = 1, .headline = count_headline,
    .labels = 1};

int count_write(const char *name, const struct stack_record *recs, size_t n,
                const struct write_options *o, struct pbuf *out)
{
    if (o->debug != 0) {
        int64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += recs[i].values[0];
        pbuf_printf(out, "%s profile: total %lld\n", name, (long long)total);
        return stack_records_text(recs, n, &count_text, out);
    }
    struct profile *p = profile_new();
    if (!p)
        return -ENOMEM;
    profile_sample_type(p, name, "count");
    profile_period(p, name, "count", 1);
    profile_time(p, o->time_nanos, o->duration_nanos);
    int err = stack_records_proto(p, recs, n, 1, out);
    profile_free(p);
    return err;
}
