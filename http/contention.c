/*
 * /debug/pprof/block and /debug/pprof/mutex, from the tables that
 * agent/contention.c fills: parameters as Go's named profiles (debug=1
 * text, seconds=N delta through two snapshots), values scaled as Go writes
 * them: block counts from the recorder's fixed point, mutex counts and
 * delays multiplied by the fraction (proto only; the text form shows raw
 * values and the sampling period, as Go's).
 */
#include "http/http.h"

#include "agent/contention.h"
#include "encoder/encoder.h"

#include <stdlib.h>

long block_count(void)
{
    return (long)stack_table_count(block_table);
}

long mutex_count(void)
{
    return (long)stack_table_count(mutex_table);
}

static void serve(struct request *r, const char *name, struct stack_table *t,
                  int is_mutex)
{
    struct table_read tr;
    if (http_table_snapshot(r, t, &tr) != 0)
        return;

    /* Go multiplies mutex records by the fraction in the proto only. */
    int64_t scale = is_mutex && tr.debug == 0 && opt_mutex_fraction > 0
                        ? opt_mutex_fraction
                        : 1;
    struct contention_record *recs =
        malloc((tr.snap.n ? tr.snap.n : 1) * sizeof *recs);
    if (!recs) {
        stack_snapshot_free(&tr.snap);
        http_error(r, 500, "failed to collect profile");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < tr.snap.n; i++) {
        const int64_t *v = &tr.snap.values[i * (size_t)tr.snap.nvalues];
        int64_t count = v[0], delay = v[1];
        if (!is_mutex)
            count = (count + CONTENTION_COUNT_SCALE / 2) /
                    CONTENTION_COUNT_SCALE;
        if (count == 0 && delay == 0)
            continue;
        /* A futex wake that signalled a condition made nobody wait for a
         * lock: block has the waiter, mutex nothing (as Go's sync.Cond). */
        if (is_mutex &&
            tr.snap.entries[i]->key == CONTENTION_KEY_FUTEX_WAKE &&
            !contention_wake_is_lock(tr.snap.entries[i]->pcs,
                                     tr.snap.entries[i]->depth))
            continue;
        recs[n].pcs = tr.snap.entries[i]->pcs;
        recs[n].depth = tr.snap.entries[i]->depth;
        recs[n].count = count * scale;
        recs[n].delay = delay * scale;
        n++;
    }

    struct pbuf out = {0};
    int err = tr.debug != 0
                  ? contention_profile_text(is_mutex ? "mutex" : "contention",
                                            is_mutex ? opt_mutex_fraction : 0,
                                            recs, n, &out)
                  : contention_profile_proto(recs, n, tr.time_nanos,
                                             tr.duration_nanos, &out);
    http_table_reply(r, name, &tr, err, &out);
    pbuf_free(&out);
    free(recs);
    stack_snapshot_free(&tr.snap);
}

void handle_block(struct request *r)
{
    serve(r, "block", block_table, 0);
}

void handle_mutex(struct request *r)
{
    serve(r, "mutex", mutex_table, 1);
}
