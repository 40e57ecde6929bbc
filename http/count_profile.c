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
    int debug = tr.debug;
    long seconds = tr.seconds;
    int64_t start = tr.start, end = tr.end;
    struct stack_snapshot snap = tr.snap;

    struct count_record *recs = malloc((snap.n ? snap.n : 1) * sizeof *recs);
    if (!recs) {
        stack_snapshot_free(&snap);
        http_error(r, 500, "failed to collect profile");
        return;
    }
    size_t n = 0;
    for (size_t i = 0; i < snap.n; i++) {
        int64_t count = snap.values[i * (size_t)snap.nvalues];
        if (count == 0)
            continue;
        recs[n].pcs = snap.entries[i]->pcs;
        recs[n].depth = snap.entries[i]->depth;
        recs[n].count = count;
        recs[n].labels = 0;
        n++;
    }

    struct pbuf out = {0};
    int err;
    if (debug != 0) {
        err = count_profile_text(name, recs, n, &out);
        if (err == 0)
            http_send_text(r, &out);
    } else {
        err = count_profile_proto(name, recs, n, seconds > 0 ? end : start,
                                  seconds > 0 ? end - start : 0, &out);
        if (err == 0) {
            char filename[128];
            log_snprintf(filename, sizeof filename,
                         seconds > 0 ? "%s-delta" : "%s", name);
            http_send_profile(r, filename, &out);
        }
    }
    if (err != 0)
        http_error(r, 500, "failed to collect profile");
    pbuf_free(&out);
    free(recs);
    stack_snapshot_free(&snap);
}
