/*
 * /debug/pprof/profile?seconds=N: a CPU profile over N seconds (default
 * 30), as Go's net/http/pprof serves it, except that an invalid `seconds`
 * is answered 400 with the reason. One profile at a time: a second request
 * gets Go's 500 "cpu profiling already in use". A client that goes away
 * stops the profile and frees the slot.
 *
 * Runs on an HTTP worker; drains the sample buffer once a second while it
 * waits, so the buffer only needs to hold a second of samples. While the
 * push (PPROF_PUSH) keeps a profile running, the request joins it as its
 * guest (agent/cpu/cpu_share.c) and is given the samples of its window.
 */
#include "http/http.h"

#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/cpu/cpu.h"
#include "encoder/encoder.h"

#include <errno.h>

static void reply(struct request *r, const struct cpu_agg *agg,
                  int64_t start, int64_t end)
{
    struct write_options o = {.time_nanos = start,
                              .duration_nanos = end - start};
    struct pbuf out = {0};
    int err = cpu_write(agg, 0, &o, &out);
    if (err == 0)
        http_send_profile(r, "profile", &out);
    else
        http_error(r, 500, "failed to collect profile");
    pbuf_free(&out);
}

/* The push's running profile, as its guest: 0 when answered. */
static int join_push(struct request *r, long seconds)
{
    struct cpu_agg *agg = cpu_agg_new();
    if (!agg || cpu_profile_join(cpu_agg_add, agg, 0) != 0) {
        cpu_agg_free(agg);
        return -EBUSY;
    }
    int64_t start = agent_now_ns();
    int gone = 0;
    for (long s = 0; s < seconds && !gone && cpu_profile_joined(agg); s++)
        gone = http_wait(r, 1) != 0;
    cpu_profile_leave(agg);
    if (!gone)
        reply(r, agg, start, agent_now_ns());
    cpu_agg_free(agg);
    return 0;
}

void handle_profile(struct request *r)
{
    long seconds = 30;
    if (http_param_seconds(r, &seconds) < 0)
        return;

    int err = cpu_profile_start(opt_cpu_hz);
    if (err == -EBUSY && join_push(r, seconds) == 0)
        return;
    if (err == -EBUSY) {
        http_error(r, 500, "Could not enable CPU profiling: cpu profiling "
                           "already in use");
        return;
    }
    if (err != 0) {
        http_error(r, 500,
                   err == -EAGAIN
                       ? "Could not enable CPU profiling: SIGPROF and every "
                         "real-time signal are in use by the program"
                       : "Could not enable CPU profiling: out of memory");
        return; /* the start released the slot itself */
    }
    int64_t start = agent_now_ns();
    struct cpu_agg *agg = cpu_agg_new();
    int gone = 0;
    for (long s = 0; s < seconds && !gone; s++) {
        gone = http_wait(r, 1) != 0;
        if (agg)
            cpu_profile_drain(cpu_agg_add, agg);
    }
    if (agg)
        cpu_profile_stop(cpu_agg_add, agg);
    else
        cpu_profile_stop(NULL, NULL);
    int64_t end = agent_now_ns();
    if (gone || !agg) {
        if (!agg && !gone)
            http_error(r, 500, "Could not enable CPU profiling: out of memory");
        cpu_agg_free(agg);
        cpu_profile_release();
        return;
    }

    reply(r, agg, start, end);
    cpu_agg_free(agg);
    cpu_profile_release();
}
