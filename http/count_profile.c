/*
 * Serving a count profile kept in a stack table (threadcreate, and later
 * goroutine-style and custom profiles): parameters as Go's named profiles,
 * an optional delta over ?seconds=N, then proto or debug=1 text.
 */
#include "http/http.h"

#include "agent/agent.h"
#include "encoder/encoder.h"

#include <stdlib.h>

void serve_count_table(struct request *r, const char *name,
                       struct stack_table *t)
{
    struct table_read tr;
    if (http_table_snapshot(r, t, &tr) != 0)
        return;

    struct count_record *recs =
        malloc((tr.snap.n ? tr.snap.n : 1) * sizeof *recs);
    if (!recs) {
        stack_snapshot_free(&tr.snap);
        http_error(r, 500, "failed to collect profile");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < tr.snap.n; i++) {
        int64_t count = tr.snap.values[i * (size_t)tr.snap.nvalues];
        if (count == 0)
            continue;
        recs[n].pcs = tr.snap.entries[i]->pcs;
        recs[n].depth = tr.snap.entries[i]->depth;
        recs[n].count = count;
        recs[n].labels = 0;
        n++;
    }

    struct pbuf out = {0};
    int err = tr.debug != 0
                  ? count_profile_text(name, recs, n, &out)
                  : count_profile_proto(name, recs, n, tr.time_nanos,
                                        tr.duration_nanos, &out);
    http_table_reply(r, name, &tr, err, &out);
    pbuf_free(&out);
    free(recs);
    stack_snapshot_free(&tr.snap);
}
