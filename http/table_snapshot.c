/*
 * Reading a stack table for a named profile the way Go's handlers read a
 * runtime profile: the debug and seconds parameters checked as Go checks
 * them, then one snapshot, or the difference of two snapshots taken
 * seconds apart (a delta profile). Shared by every profile kept in a stack
 * table (threadcreate, heap and allocs, block and mutex, custom). Runs on
 * the agent's server threads; the wait of a delta blocks only this request.
 */
#include "http/http.h"
#include "agent/core/real.h"

#include "agent/core/clock.h"
#include "agent/log.h"
#include "agent/stacks/stack_table.h"
#include "encoder/encoder.h"

#include <stdlib.h>

int http_table_window(struct request *r, struct table_read *tr,
                      const struct table_take *take, void *arg)
{
    tr->o = (struct write_options){.debug = http_param_debug(r)};
    if (http_param_delta_seconds(r, http_delta_ok(r), tr->o.debug,
                                 &tr->seconds) != 0)
        return -1;

    int64_t start = agent_now_ns();
    if (take->first(arg, tr) != 0) {
        http_error(r, 500, "failed to collect profile");
        return -1;
    }
    if (tr->seconds > 0) {
        if (http_wait(r, tr->seconds) != 0) {
            take->drop(arg, tr);
            http_error(r, 500, "context canceled");
            return -1;
        }
        if (take->later(arg, tr) != 0) {
            http_error(r, 500, "failed to collect profile");
            return -1;
        }
    }
    int64_t end = agent_now_ns();
    /* As Go: a full profile is stamped when it was taken, a delta when its
     * second snapshot was, with the window as its duration. */
    tr->o.time_nanos = tr->seconds > 0 ? end : start;
    tr->o.duration_nanos = tr->seconds > 0 ? end - start : 0;
    return 0;
}

/* A stack table's window: snapshots, subtracted. */
static int snap_first(void *t, struct table_read *tr)
{
    return stack_table_snapshot(t, &tr->snap);
}

static void snap_drop(void *t, struct table_read *tr)
{
    (void)t;
    stack_snapshot_free(&tr->snap);
}

static int snap_later(void *t, struct table_read *tr)
{
    struct stack_snapshot later;
    if (stack_table_snapshot(t, &later) != 0) {
        stack_snapshot_free(&tr->snap);
        return -1;
    }
    stack_snapshot_subtract(&later, &tr->snap);
    stack_snapshot_free(&tr->snap);
    tr->snap = later;
    return 0;
}

int http_table_snapshot(struct request *r, struct stack_table *t,
                        struct table_read *out)
{
    static const struct table_take snaps = {snap_first, snap_later,
                                            snap_drop};
    return http_table_window(r, out, &snaps, t);
}

void http_reply(struct request *r, const char *name,
                const struct write_options *o, int err, struct pbuf *out)
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
    pbuf_free(out);
}

void serve_count_table(struct request *r, const char *name,
                       struct stack_table *t)
{
    struct table_read tr;
    if (http_table_snapshot(r, t, &tr) != 0)
        return;
    struct pbuf out = {0};
    struct stack_record *recs =
        real_malloc((tr.snap.n ? tr.snap.n : 1) * sizeof *recs);
    int err = -1;
    if (recs) {
        size_t n = count_records_from_snapshot(&tr.snap, recs);
        err = count_write(name, recs, n, &tr.o, &out);
    }
    http_reply(r, name, &tr.o, err, &out);
    real_free(recs);
    stack_snapshot_free(&tr.snap);
}
