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

#include "agent/locks/deadlock.h"
#include "encoder/encoder.h"

#include <stdlib.h>

void handle_deadlock(struct request *r)
{
    struct write_options o = {.debug = http_param_debug(r)};
    int64_t min_ns = 5000000000LL; /* min_seconds=S, 5 s when absent */
    if (http_param_ns(r, "min_seconds", &min_ns) < 0)
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
}

long deadlock_count(const char *name)
{
    (void)name;
    return (long)deadlock_waiting();
}
