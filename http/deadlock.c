/*
 * /debug/pprof/deadlock: every cycle of threads each waiting for a lock
 * the next holds, and every thread stuck behind a holder blocked elsewhere,
 * whose waits have lasted at least min_seconds (default 5), looked for by
 * agent/locks/deadlock.c and written by encoder/deadlock.c.
 *
 *   debug=0      a profile, one sample per thread involved
 *   debug=1      text
 *   min_seconds  the shortest wait listed, seconds (fractions allowed)
 *
 * Runs on an HTTP worker.
 */
#include "http/http.h"

#include "agent/deadlock.h"
#include "encoder/encoder.h"

#include <math.h>
#include <stdlib.h>

/* min_seconds=S: a non-negative number of seconds. Returns 0 with *ns set
 * (the default when absent), -1 after answering 400. */
static int param_min_seconds(struct request *r, int64_t *ns)
{
    char buf[64];
    *ns = 5000000000LL;
    if (!http_param(r, "min_seconds", buf, sizeof buf) || buf[0] == '\0')
        return 0;
    char *end;
    double v = strtod(buf, &end);
    if (*end != '\0' || !(v >= 0) || v > 1e9 || isnan(v)) {
        http_error(r, 400,
                   "invalid value for \"min_seconds\" - must be a "
                   "non-negative number of seconds");
        return -1;
    }
    *ns = (int64_t)(v * 1e9);
    return 0;
}

void handle_deadlock(struct request *r)
{
    struct write_options o = {.debug = http_param_debug(r)};
    int64_t min_ns;
    if (param_min_seconds(r, &min_ns) != 0)
        return;
    struct deadlock_report rep;
    if (deadlock_look(min_ns, &rep) != 0) {
        http_error(r, 500, "failed to collect profile");
        return;
    }
    o.time_nanos = rep.time_ns;
    struct pbuf out = {0};
    int err = deadlock_write(&rep, &o, &out);
    deadlock_report_free(&rep);
    http_reply(r, "deadlock", &o, err, &out);
    pbuf_free(&out);
}

long deadlock_count(const char *name)
{
    (void)name;
    return (long)deadlock_waiting();
}
