/*
 * /debug/pprof/heap and /debug/pprof/allocs: the sampled heap buckets kept
 * by agent/heap_table.c, as Go serves them (the same data, default sample
 * type inuse_space for heap and alloc_space for allocs), with Go's
 * parameters: debug=1 text, seconds=N delta, gc=N accepted (a native
 * process has no collector to run; live data is always current).
 */
#include "http/http.h"

#include "agent/heap.h"
#include "encoder/encoder.h"

#include <stdlib.h>

long heap_profile_count(void)
{
    return (long)stack_table_count(heap_buckets);
}

static void describe(char *buf, size_t size, const char *sep)
{
    struct heap_stats st;
    heap_table_stats(&st);
    log_snprintf(buf, size,
                 "pprofagent heap: rate=%ld%ssampled=%ld%slive=%ld%s"
                 "lost=%ld (samples not recorded for lack of table room)",
                 opt_heap_rate, sep, st.sampled, sep, st.live, sep, st.lost);
}

static void serve_heap(struct request *r, const char *name,
                       const char *default_type)
{
    struct table_read tr;
    if (http_table_snapshot(r, heap_buckets, &tr) != 0)
        return;

    struct heap_record *recs =
        malloc((tr.snap.n ? tr.snap.n : 1) * sizeof *recs);
    if (!recs) {
        stack_snapshot_free(&tr.snap);
        http_error(r, 500, "failed to collect profile");
        return;
    }
    size_t n = heap_records_from_snapshot(&tr.snap, tr.seconds > 0, recs);

    struct pbuf out = {0};
    char info[256];
    int err;
    if (tr.debug != 0) {
        char trailer[300];
        describe(info, sizeof info, "\n# ");
        log_snprintf(trailer, sizeof trailer, "# %s\n", info);
        err = heap_profile_text(recs, n, opt_heap_rate, trailer, &out);
    } else {
        describe(info, sizeof info, " ");
        err = heap_profile_proto(recs, n, opt_heap_rate, default_type,
                                 tr.time_nanos, tr.duration_nanos, info, &out);
    }
    http_table_reply(r, name, &tr, err, &out);
    pbuf_free(&out);
    free(recs);
    stack_snapshot_free(&tr.snap);
}

void handle_heap(struct request *r)
{
    serve_heap(r, "heap", NULL);
}

void handle_allocs(struct request *r)
{
    serve_heap(r, "allocs", "alloc_space");
}
