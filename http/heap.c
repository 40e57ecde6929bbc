/*
 * /debug/pprof/heap and /debug/pprof/allocs: the sampled heap buckets kept
 * by agent/heap_table.c, as Go serves them (the same data, default sample
 * type inuse_space for heap and alloc_space for allocs), with Go's
 * parameters: debug=1 text, seconds=N delta, gc=N accepted (a native
 * process has no collector to run; live data is always current).
 *
 * Beyond Go: a full profile labels its live samples with their age bucket
 * ("age" label, encoder/heap.c), min_age=SECONDS keeps only live samples
 * at least that old (leaks), and /debug/pprof/peak serves the copy kept
 * at the high-water mark of the in-use estimate (agent/heap_peak.c).
 */
#include "http/http.h"

#include "agent/heap.h"
#include "encoder/encoder.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

long heap_profile_count(const char *name)
{
    (void)name;
    return (long)stack_table_count(heap_buckets);
}

/* Writes records as the request asked and answers. */
static void reply_records(struct request *r, const char *name,
                          const struct write_options *o,
                          const struct heap_record *recs, size_t n,
                          const char *extra)
{
    struct pbuf out = {0};
    int err = heap_write(name, recs, n, extra, o, &out);
    http_reply(r, name, o, err, &out);
    pbuf_free(&out);
}

/* min_age=SECONDS: a non-negative number of seconds, fractions allowed.
 * Returns 1 with *ns set, 0 when absent, -1 after answering 400. */
static int param_min_age(struct request *r, int64_t *ns)
{
    char buf[64];
    if (!http_param(r, "min_age", buf, sizeof buf) || buf[0] == '\0')
        return 0;
    char *end;
    double v = strtod(buf, &end);
    if (*end != '\0' || !(v >= 0) || v > 1e9 || isnan(v)) {
        http_error(r, 400,
                   "invalid value for \"min_age\" - must be a non-negative "
                   "number of seconds");
        return -1;
    }
    *ns = (int64_t)(v * 1e9);
    return 1;
}

/* Records of the live samples at least min_age_ns old, now. */
static int min_age_records(int64_t min_age_ns, int by_age,
                           struct heap_record **out, size_t *n)
{
    struct heap_live *live = NULL;
    size_t nlive = 0;
    if (heap_table_live(&live, &nlive) != 0)
        return -ENOMEM;
    int64_t now = heap_table_now_ns();
    /* Twice the room: a delta appends the earlier copy's leftovers. */
    *out = malloc((2 * nlive + 1) * sizeof **out);
    if (!*out) {
        free(live);
        return -ENOMEM;
    }
    *n = heap_records_min_age(live, nlive, now, min_age_ns, by_age, *out);
    free(live);
    return 0;
}

/* heap?min_age=N (and allocs): only live samples at least N s old. With
 * seconds=S, the change over S seconds of that set, per bucket. */
static void serve_min_age(struct request *r, const char *name,
                          int64_t min_age_ns)
{
    struct table_read tr = {0};
    tr.o.debug = http_param_debug(r);
    if (http_param_delta_seconds(r, http_delta_ok(r), tr.o.debug, &tr.seconds) != 0)
        return;
    int64_t start = agent_now_ns();
    struct heap_record *recs = NULL, *later = NULL;
    size_t n = 0, nlater = 0;
    if (min_age_records(min_age_ns, tr.seconds == 0 && tr.o.debug == 0, &recs,
                        &n) != 0) {
        http_error(r, 500, "failed to collect profile");
        return;
    }
    if (tr.seconds > 0) {
        if (http_wait(r, tr.seconds) != 0) {
            free(recs);
            http_error(r, 500, "context canceled");
            return;
        }
        if (min_age_records(min_age_ns, 0, &later, &nlater) != 0) {
            free(recs);
            http_error(r, 500, "failed to collect profile");
            return;
        }
        struct heap_record *both =
            realloc(later, (nlater + n + 1) * sizeof *later);
        if (!both) {
            free(recs);
            free(later);
            http_error(r, 500, "failed to collect profile");
            return;
        }
        later = both;
        nlater = heap_records_subtract(later, nlater, recs, n);
        free(recs);
        recs = later;
        n = nlater;
    }
    int64_t end = agent_now_ns();
    tr.o.time_nanos = tr.seconds > 0 ? end : start;
    tr.o.duration_nanos = tr.seconds > 0 ? end - start : 0;
    char extra[80];
    log_snprintf(extra, sizeof extra, "min_age=%lldms",
                 (long long)(min_age_ns / 1000000));
    reply_records(r, name, &tr.o, recs, n, extra);
    free(recs);
}

static void serve_heap(struct request *r, const char *name)
{
    int64_t min_age_ns = 0;
    int has_min_age = param_min_age(r, &min_age_ns);
    if (has_min_age < 0)
        return;
    if (has_min_age) {
        serve_min_age(r, name, min_age_ns);
        return;
    }
    char sbuf[8];
    struct table_read tr = {0};
    struct heap_record *recs = NULL;
    size_t n = 0;
    int err;
    if (!http_param(r, "seconds", sbuf, sizeof sbuf)) {
        /* A full profile: the proto labels live samples with their age. */
        tr.o.debug = http_param_debug(r);
        tr.o.time_nanos = agent_now_ns();
        err = heap_records_take(tr.o.debug == 0, &recs, &n, &tr.snap);
    } else {
        if (http_table_snapshot(r, heap_buckets, &tr) != 0)
            return;
        err = heap_records_of(&tr.snap, tr.seconds > 0, 0, NULL, 0, 0, &recs,
                              &n);
        if (err)
            stack_snapshot_free(&tr.snap);
    }
    if (err) {
        http_error(r, 500, "failed to collect profile");
        return;
    }
    reply_records(r, name, &tr.o, recs, n, NULL);
    free(recs);
    stack_snapshot_free(&tr.snap);
}

/* /debug/pprof/peak: the heap profile as it was at the high-water mark of
 * the in-use estimate since start or the last reset=1 (which starts a new
 * period after this answer): each bucket's in-use count then, as
 * agent/heap_peak.c keeps it. */
void handle_peak(struct request *r)
{
    struct table_read tr = {0};
    tr.o.debug = http_param_debug(r);
    if (http_param_delta_seconds(r, http_delta_ok(r), tr.o.debug, &tr.seconds) != 0)
        return;
    char buf[8];
    int reset = http_param(r, "reset", buf, sizeof buf) &&
                strcmp(buf, "0") != 0 && buf[0] != '\0';
    if (stack_table_snapshot(heap_buckets, &tr.snap) != 0) {
        http_error(r, 500, "failed to collect profile");
        return;
    }
    struct heap_peak_info info;
    heap_peak_apply(&tr.snap, &info, reset);
    struct heap_record *recs =
        malloc((tr.snap.n ? tr.snap.n : 1) * sizeof *recs);
    if (!recs) {
        stack_snapshot_free(&tr.snap);
        http_error(r, 500, "failed to collect profile");
        return;
    }
    size_t n = heap_records_from_snapshot(&tr.snap, 0, recs);
    int64_t shown = 0;
    for (size_t i = 0; i < n; i++)
        shown += (int64_t)llround((double)recs[i].alloc_objects *
                                  (double)recs[i].size *
                                  heap_scale(recs[i].size, opt_heap_rate));
    tr.o.time_nanos = info.time_ns ? info.time_ns : agent_now_ns();
    char extra[300];
    log_snprintf(extra, sizeof extra,
                 "peak: inuse=%lld high_water=%lld highs=%ld "
                 "since_unix_ms=%lld (0: start)%s",
                 (long long)shown, (long long)info.high_water_bytes,
                 info.highs, (long long)(info.since_ns / 1000000),
                 reset ? " (reset: a new period starts now)" : "");
    reply_records(r, "peak", &tr.o, recs, n, extra);
    free(recs);
    stack_snapshot_free(&tr.snap);
}

long heap_peak_count(const char *name)
{
    (void)name;
    struct stack_snapshot s;
    if (stack_table_snapshot(heap_buckets, &s) != 0)
        return 0;
    struct heap_peak_info info;
    heap_peak_apply(&s, &info, 0);
    long n = 0;
    for (size_t i = 0; i < s.n; i++)
        n += s.values[i * (size_t)s.nvalues + HEAP_ALLOC_OBJECTS] > 0;
    stack_snapshot_free(&s);
    return n;
}

void handle_heap(struct request *r)
{
    serve_heap(r, "heap");
}

void handle_allocs(struct request *r)
{
    serve_heap(r, "allocs");
}
