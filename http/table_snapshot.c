/*
 * Reading a stack table for a named profile the way Go's handlers read a
 * runtime profile: the debug and seconds parameters checked as Go checks
 * them, then one snapshot, or the difference of two snapshots taken
 * seconds apart (a delta profile). Shared by every profile kept in a stack
 * table (threadcreate, heap and allocs, block and mutex). Runs on the
 * agent's server threads; the wait of a delta blocks only this request.
 */
#include "http/http.h"

#include "agent/agent.h"
#include "encoder/encoder.h"

int http_table_snapshot(struct request *r, struct stack_table *t,
                        struct table_read *out)
{
    out->debug = http_param_debug(r);
    if (http_param_delta_seconds(r, 1, out->debug, &out->seconds) != 0)
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
    out->time_nanos = out->seconds > 0 ? end : start;
    out->duration_nanos = out->seconds > 0 ? end - start : 0;
    return 0;
}

void http_table_reply(struct request *r, const char *name,
                      const struct table_read *tr, int err,
                      const struct pbuf *out)
{
    if (err != 0) {
        http_error(r, 500, "failed to collect profile");
    } else if (tr->debug != 0) {
        http_send_text(r, out);
    } else {
        char filename[128];
        log_snprintf(filename, sizeof filename,
                     tr->seconds > 0 ? "%s-delta" : "%s", name);
        http_send_profile(r, filename, out);
    }
}
