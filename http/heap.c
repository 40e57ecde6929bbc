/*
 * /debug/pprof/heap and /debug/pprof/allocs: the sampled heap buckets kept
 * by agent/heap/heap_table.c, as Go serves them (the same data, default sample
 * type inuse_space for heap and alloc_space for allocs), with Go's
 * parameters: debug=1 text, seconds=N delta, gc=N accepted (a native
 * process has no collector to run; live data is always current).
 *
 * Beyond Go: a full profile labels its live samples with their age bucket
 * ("age" label, encoder/heap.c), min_age=SECONDS keeps only live samples
 * at least that old (leaks), and /debug/pprof/peak serves the copy kept
 * at the high-water mark of the in-use estimate (agent/heap/heap_peak.c).
 */
#include "http/http.h"
#include "agent/core/real.h"

#include "agent/heap/heap.h"
#include "agent/core/clock.h"
#include "agent/log.h"
#include "agent/stacks/stack_table.h"
#include "encoder/encoder.h"

#include <errno.h>
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
}

/* heap?min_age=N (and allocs): only live samples at least N s old. With
 * seconds=S, the change over S seconds of that set, per bucket. */
struct min_age_read {
    int64_t min_age_ns;
    struct heap_record *recs;
    size_t n;
};

static int min_age_first(void *arg, struct table_read *tr)
{
    struct min_age_read *m = arg;
    return heap_records_take_min_age(m->min_age_ns,
                                     tr->seconds == 0 && tr->o.debug == 0,
                                     &m->recs, &m->n);
}

static int min_age_later(void *arg, struct table_read *tr)
{
    (void)tr;
    struct min_age_read *m = arg;
    struct heap_record *later = NULL;
    size_t nlater = 0;
    int err = heap_records_take_min_age(m->min_age_ns, 0, &later, &nlater);
    if (err == 0)
        err = heap_records_delta(&later, &nlater, m->recs, m->n);
    real_free(m->recs);
    m->recs = later;
    m->n = nlater;
    if (err != 0) {
        real_free(later);
        m->recs = NULL;
    }
    return err;
}

static void min_age_drop(void *arg, struct table_read *tr)
{
    (void)tr;
    struct min_age_read *m = arg;
    real_free(m->recs);
    m->recs = NULL;
}

static void serve_min_age(struct request *r, const char *name,
                          int64_t min_age_ns)
{
    static const struct table_take take = {min_age_first, min_age_later,
                                           min_age_drop};
    struct table_read tr = {0};
    struct min_age_read m = {.min_age_ns = min_age_ns};
    if (http_table_window(r, &tr, &take, &m) != 0)
        return;
    char extra[80];
    log_snprintf(extra, sizeof extra, "min_age=%lldms",
                 (long long)(min_age_ns / 1000000));
    reply_records(r, name, &tr.o, m.recs, m.n, extra);
    real_free(m.recs);
}

static void serve_heap(struct request *r, const char *name)
{
    int64_t min_age_ns = 0;
    int has_min_age = http_param_ns(r, "min_age", &min_age_ns);
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
    real_free(recs);
    stack_snapshot_free(&tr.snap);
}

/* /debug/pprof/peak: the heap profile as it was at the high-water mark of
 * the in-use estimate since start or the last reset=1 (which starts a new
 * period after this answer): each bucket's in-use count then, as
 * agent/heap/heap_peak.c keeps it. */
void handle_peak(struct request *r)
{
    struct table_read tr = {0};
    tr.o.debug = http_param_debug(r);
    if (http_param_delta_seconds(r, http_delta_ok(r), tr.o.debug,
                                 &tr.seconds) != 0)
        return;
    char buf[8];
    int reset = http_param(r, "reset", buf, sizeof buf) &&
                strcmp(buf, "0") != 0 && buf[0] != '\0';
    struct heap_record *recs;
    size_t n;
    char extra[300];
    if (heap_records_take_peak(reset, &recs, &n, &tr.snap, &tr.o.time_nanos,
                               extra, sizeof extra) != 0) {
        http_error(r, 500, "failed to collect profile");
        return;
    }
    if (!tr.o.time_nanos)
        tr.o.time_nanos = agent_now_ns();
    reply_records(r, "peak", &tr.o, recs, n, extra);
    real_free(recs);
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
