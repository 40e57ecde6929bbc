/*
 * /debug/pprof/trace?seconds=N: an execution trace over N seconds (a
 * fraction allowed; missing, zero, negative or unreadable: 1 s, as Go's
 * net/http/pprof), in Go's execution-trace format for `go tool trace`.
 * More than 3600 s gets Go's 400 for a duration past the server's write
 * timeout; a second trace while one runs gets Go's 500 "Could not enable
 * tracing: tracing is already enabled". A client that goes away stops the
 * trace and frees its memory. The trace holds CPU samples when the CPU
 * profiler is free to take them (no CPU profile running meanwhile).
 *
 * With the flight recorder on (PPROF_TRACE_FLIGHT), ?flight=1 answers at
 * once with what it keeps (the last SECONDS to twice that), and a timed
 * trace is the recorder's last N seconds after waiting them. Without it,
 * ?flight=1 gets 400 with the reason.
 *
 * Runs on an HTTP worker; drains the CPU samples once a second while it
 * waits. A trace that outgrew its memory says so in a header,
 * X-Pprof-Trace-Dropped: N (and inside the trace).
 */
#include "http/http.h"
#include "agent/core/real.h"

#include "agent/core/array.h"
#include "agent/config.h"
#include "agent/cpu/cpu.h"
#include "agent/log.h"
#include "agent/trace/trace.h"
#include "encoder/encoder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRACE_SECONDS_MAX 3600

/* The CPU samples of the window, copied out of the profiler's buffer. */
struct samples {
    struct trace_sample *s;
    uintptr_t *pcs;
    size_t n, cap, npcs, pcs_cap;
    int oom;
};

static void keep_sample(const struct cpu_sample *c, void *arg)
{
    struct samples *k = arg;
    if (k->oom)
        return;
    if (ARRAY_RESERVE(k->s, k->cap, k->n + 1, 1024) != 0 ||
        ARRAY_RESERVE(k->pcs, k->pcs_cap, k->npcs + c->depth,
                      1024 * CPU_STACK_MAX) != 0) {
        k->oom = 1;
        return;
    }
    memcpy(k->pcs + k->npcs, c->pcs, c->depth * sizeof *c->pcs);
    /* Stacks point into pcs by offset until the end (pcs may move). */
    k->s[k->n++] = (struct trace_sample){c->tid, c->depth, c->ns,
                                         (const uintptr_t *)(uintptr_t)k->npcs};
    k->npcs += c->depth;
}

/* Seconds from the query as Go reads them: 1 unless a positive number. */
static double trace_seconds(struct request *r)
{
    char buf[64];
    if (!http_param(r, "seconds", buf, sizeof buf) || !buf[0])
        return 1;
    char *end;
    double s = strtod(buf, &end);
    if (*end || !(s > 0))
        return 1;
    return s;
}

/* Waits seconds in steps of 50 ms, the trace's memory made present
 * ahead of its writers at each, CPU samples drained every second; -1 when
 * the client went away. */
static int wait_window(struct request *r, double seconds, int cpu,
                       struct samples *k)
{
    int64_t end = trace_clock() + (int64_t)(seconds * 1e9);
    int64_t drain = trace_clock() + 1000000000LL;
    for (;;) {
        int64_t now = trace_clock();
        if (now >= end)
            return 0;
        if (http_client_gone(r))
            return -1;
        int64_t step = end - now < 50000000LL ? end - now : 50000000LL;
        struct timespec nap = {0, (long)step};
        real_nanosleep(&nap, NULL);
        trace_fill_ahead();
        if (cpu && trace_clock() >= drain) {
            cpu_profile_drain(keep_sample, k);
            drain += 1000000000LL;
        }
    }
}

/* The window written by the flight recorder: since (0: all it keeps). */
static int flight_window(struct request *r, int64_t since)
{
    int err = trace_flight_take(since);
    if (err)
        http_error(r, 500, "Could not enable tracing: tracing is already "
                           "enabled");
    return err;
}

void handle_trace(struct request *r)
{
    double seconds = trace_seconds(r);
    char flight[8];
    int want_flight = http_param(r, "flight", flight, sizeof flight) &&
                      flight[0] && strcmp(flight, "0") != 0;
    if (want_flight && !trace_flight_on()) {
        http_error(r, 400, "the flight recorder is off: start the program "
                           "with PPROF_TRACE_FLIGHT=SECONDS");
        return;
    }
    if (seconds > TRACE_SECONDS_MAX) {
        http_error(r, 400, "profile duration exceeds server's WriteTimeout");
        return;
    }
    struct samples k = {0};
    int cpu = 0, gone = 0;
    if (want_flight) {
        if (flight_window(r, 0))
            return;
    } else if (trace_flight_on()) {
        int64_t since = trace_clock();
        cpu = cpu_profile_start(opt_cpu_hz) == 0;
        gone = wait_window(r, seconds, cpu, &k);
        if (cpu) {
            cpu_profile_stop(keep_sample, &k);
            cpu_profile_release();
        }
        if (gone || flight_window(r, since))
            goto out;
    } else {
        int err = trace_start();
        if (err) {
            http_error(r, 500, err == -EBUSY ? "Could not enable tracing: "
                                               "tracing is already enabled"
                                             : "Could not enable tracing: "
                                               "out of memory");
            return;
        }
        cpu = cpu_profile_start(opt_cpu_hz) == 0;
        gone = wait_window(r, seconds, cpu, &k);
        trace_stop();
        if (cpu) {
            cpu_profile_stop(keep_sample, &k);
            cpu_profile_release();
        }
    }
    if (!gone) {
        for (size_t i = 0; i < k.n; i++)
            k.s[i].pcs = k.pcs + (uintptr_t)k.s[i].pcs;
        struct pbuf out = {0};
        if (trace_write(k.s, k.oom ? 0 : k.n, &out) == 0) {
            char extra[96] = "";
            if (trace_dropped)
                log_snprintf(extra, sizeof extra,
                         "X-Pprof-Trace-Dropped: %llu\r\n",
                         (unsigned long long)trace_dropped);
            http_send_with(r, "application/octet-stream", "trace", extra,
                           out.data, out.len);
        } else {
            http_error(r, 500, "Could not write the trace: out of memory");
        }
        pbuf_free(&out);
    }
    if (trace_flight_on())
        trace_flight_give();
    else
        trace_release();
out:
    real_free(k.s);
    real_free(k.pcs);
}
