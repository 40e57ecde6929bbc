/*
 * /debug/pprof/goroutine: every host thread of the process now, written by
 * encoder/goroutine.c.
 *
 *   debug=0  proto, goroutine/count: threads with the same stack and the
 *            same labels grouped, the count how many share it
 *   debug=1  the same groups as Go's legacy text
 *   debug=2  every thread: tid, name, state, labels, symbolized stack
 *   seconds=N  (debug=0) the change over N seconds, as Go's delta profiles
 *
 * The agent's own threads are not listed. Runs on an HTTP worker.
 */
#include "http/http.h"

#include "agent/core/clock.h"
#include "agent/threads/threads.h"
#include "encoder/encoder.h"

void handle_goroutine(struct request *r)
{
    struct write_options o = {.debug = http_param_debug(r)};
    long seconds;
    if (http_param_delta_seconds(r, http_delta_ok(r), o.debug, &seconds) != 0)
        return;
    int64_t start = agent_now_ns();
    struct goroutine_snapshot s;
    if (goroutine_take(&s, o.debug) != 0) {
        http_error(r, 500, "failed to collect profile");
        return;
    }
    if (seconds > 0 && o.debug < 2) {
        struct goroutine_snapshot later;
        if (http_wait(r, seconds) != 0) {
            goroutine_free(&s);
            http_error(r, 500, "context canceled");
            return;
        }
        int taken = goroutine_take(&later, o.debug) == 0;
        int err = taken ? goroutine_subtract(&later, &s) : -1;
        goroutine_free(&s);
        if (err != 0) {
            goroutine_free(&later);
            http_error(r, 500, taken ? "failed to compute delta"
                                     : "failed to collect profile");
            return;
        }
        s = later;
    }
    int64_t end = agent_now_ns();
    o.time_nanos = seconds > 0 ? end : start;
    o.duration_nanos = seconds > 0 ? end - start : 0;
    struct pbuf out = {0};
    int err = goroutine_write(&s, &o, &out);
    goroutine_free(&s);
    http_reply(r, "goroutine", &o, err, &out);
}

long goroutine_count(const char *name)
{
    (void)name;
    return threads_host_count();
}
