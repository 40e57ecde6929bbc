/*
 * Contention profiles (block, mutex): stacks with a count and a delay, as a
 * proto shaped as Go's (contentions/count, delay/nanoseconds, period type
 * contentions/count, period 1) or as Go's debug=1 text ("--- contention:"
 * or "--- mutex:", cycles/second, records sorted by delay). Runs on the
 * agent's server threads only.
 *
 * Values as Go writes them. Block counts are kept by the recorder in fixed
 * point (1/CONTENTION_COUNT_SCALE of a contention, agent/locks/contention.h) and
 * are rounded to whole contentions here. Mutex events are recorded with
 * probability 1/opt_mutex_fraction, so the proto multiplies counts and
 * delays by the fraction to estimate the truth; the text form shows the
 * raw values and says "sampling period=N", as Go's does.
 */
#include "encoder/encoder.h"
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/locks/contention.h"
#include "agent/stacks/stack_table.h"

#include <errno.h>
#include <stdlib.h>

/* The records of a block or mutex table snapshot, scaled as the form
 * wants them (values[0] count, values[1] delay). out has room for snap->n.
 * Returns how many. */
static size_t contention_records(int is_mutex, int debug,
                                 const struct stack_snapshot *snap,
                                 struct stack_record *out)
{
    /* Go multiplies mutex records by the fraction in the proto only. */
    int64_t scale = is_mutex && debug == 0 && opt_mutex_fraction > 0
                        ? opt_mutex_fraction
                        : 1;
    size_t n = 0;
    for (size_t i = 0; i < snap->n; i++) {
        const int64_t *v = &snap->values[i * (size_t)snap->nvalues];
        const struct stack_entry *e = snap->entries[i];
        int64_t count = v[0], delay = v[1];
        if (!is_mutex)
            count = (count + CONTENTION_COUNT_SCALE / 2) /
                    CONTENTION_COUNT_SCALE;
        if (count == 0 && delay == 0)
            continue;
        /* A futex wake that signalled a condition made nobody wait for a
         * lock: block has the waiter, mutex nothing (as Go's sync.Cond). */
        if (is_mutex && e->key == CONTENTION_KEY_FUTEX_WAKE &&
            !contention_wake_is_lock(e->pcs, e->depth))
            continue;
        out[n++] = (struct stack_record){
            .pcs = e->pcs,
            .depth = e->depth,
            .values = {count * scale, delay * scale},
        };
    }
    return n;
}

static void contention_headline(const struct stack_record *r,
                                struct pbuf *out)
{
    pbuf_printf(out, "%lld %lld", (long long)r->values[1],
                (long long)r->values[0]);
}

/* Largest delay first, then most contentions. */
static const struct stack_text_form contention_text = {
    .keys = {1, 0}, .nkeys = 2, .tiebreak = 1,
    .headline = contention_headline};

int contention_write(int is_mutex, const struct stack_snapshot *snap,
                     const struct write_options *o, struct pbuf *out)
{
    struct stack_record *recs = real_malloc((snap->n ? snap->n : 1) * sizeof *recs);
    if (!recs)
        return -ENOMEM;
    size_t n = contention_records(is_mutex, o->debug, snap, recs);
    int err = -ENOMEM;
    if (o->debug != 0) {
        /* Delays are kept in ns: one "cycle" is one nanosecond. */
        pbuf_printf(out, "--- %s:\ncycles/second=1000000000\n",
                    is_mutex ? "mutex" : "contention");
        if (is_mutex && opt_mutex_fraction > 0)
            pbuf_printf(out, "sampling period=%ld\n", opt_mutex_fraction);
        err = stack_records_text(recs, n, &contention_text, out);
    } else {
        struct profile *p = profile_new();
        if (p) {
            profile_sample_type(p, "contentions", "count");
            profile_sample_type(p, "delay", "nanoseconds");
            profile_period(p, "contentions", "count", 1);
            profile_time(p, o->time_nanos, o->duration_nanos);
            /* No wait reaches the agent: the profile says why it is
             * empty. */
            if (contention_unseen[0]) {
                profile_comment(p, contention_unseen);
                notes_set(is_mutex ? "mutex" : "block", contention_unseen);
            }
            err = stack_records_proto(p, recs, n, 2, out);
            profile_free(p);
        }
    }
    real_free(recs);
    return err;
}
