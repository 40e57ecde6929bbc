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
    int debug = http_param_debug(r);
    long seconds;
    if (http_param_delta_seconds(r, 1, debug, &seconds) != 0)
        return;

    int64_t start = agent_now_ns();
    struct stack_snapshot snap;
    if (stack_table_snapshot(t, &snap) != 0) {
        http_error(r, 500, "failed to collect profile");
        return;
    }
    if (seconds > 0) {
        struct stack_snapshot later;
        if (http_wait(r, seconds) != 0) {
            stack_snapshot_free(&snap);
            http_error(r, 500, "context canceled");
            return;
        }
        if (stack_table_snapshot(t, &later) != 0) {
            stack_snapshot_free(&snap);
            http_error(r, 500, "failed to collect profile");
            return;
        }
        stack_snapshot_subtract(&later, &snap);
        stack_snapshot_free(&snap);
        snap = later;
    }
    int64_t end = agent_now_ns();

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
