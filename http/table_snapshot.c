/*
 * Reading a stack table for a named profile the way Go's handlers read a
 * runtime profile: the debug and seconds parameters checked as Go checks
 * them, then one snapshot, or the difference of two snapshots taken
 * seconds apart (a delta profile). Shared by every profile kept in a stack
 * table (threadcreate, heap and allocs, block and mutex, custom). Runs on
 * the agent's server threads; the wait of a delta blocks only this request.
 */
#include "http/http.h"

#include "agent/agent.h"
#include "encoder/encoder.h"

#include <stdlib.h>

int http_table_snapshot(struct request *r, struct stack_table *t,
                        struct table_read *out)
{
    out->o = (struct write_options){.debug = http_param_debug(r)};
    if (http_param_delta_seconds(r, http_delta_ok(r), out->o.debug,
                                 &out->seconds) != 0)
        return -1;

    int64_t start = agent_now_ns();
    if (stack_table_snapshot(t, &out->snap) != 0) {
        http_error(r, 500, "failed to collect profile");
        return -1;
    }
    if (out->seconds > 0) {
        struct stack_snapshot later;
        if (http_wait(r, out->seconds) != 0) {
            stack_snapshot_free(&out->snap);
            http_error(r, 500, "context canceled");
            return -1;
        }
        if (stack_table_snapshot(t, &later) != 0) {
            stack_snapshot_free(&out->snap);
            http_error(r, 500, "failed to collect profile");
            return -1;
        }
        stack_snapshot_subtract(&later, &out->snap);
        stack_snapshot_free(&out->snap);
        out->snap = later;
    }
    int64_t end = agent_now_ns();
    /* As Go: a full profile is stamped when it was taken, a delta when its
     * second snapshot was, with the window as its duration. */
    out->o.time_nanos = out->seconds > 0 ? end : start;
    out->o.duration_nanos = out->seconds > 0 ? end - start : 0;
    return 0;
}

void http_reply(struct request *r, const char *name,
                const struct write_options *o, int err,
                const struct pbuf *out)
{
    if (err != 0) {
        http_error(r, 500, "failed to collect profile");
    } else if (o->debug != 0) {
        http_send_text(r, out);
    } else {
        char filename[128];
        log_snprintf(filename, sizeof filename,
                     o->duration_nanos > 0 ? "%s-delta" : "%s", name);
        http_send_profile(r, filename, out);
    }
}

void serve_count_table(struct request *r, const char *name,
                       struct stack_table *t)
{
    struct table_read tr;
    if (http_table_snapshot(r, t, &tr) != 0)
        return;
    struct pbuf out = {0};
    struct stack_record *recs =
        malloc((tr.snap.n ? tr.snap.n : 1) * sizeof *recs);
    int err = -1;
    if (recs) {
        size_t n = count_records_from_snapshot(&tr.snap, recs);
        err = count_write(name, recs, n, &tr.o, &out);
    }
    http_reply(r, name, &tr.o, err, &out);
    pbuf_free(&out);
    free(recs);
    stack_snapshot_free(&tr.snap);
}
