/*
 * /debug/pprof/goroutine: every host thread of the process now (the native
 * meaning of Go's goroutine profile), taken by agent/threads.c.
 *
 *   debug=0  proto, goroutine/count: threads with the same stack and the
 *            same labels grouped, the count how many share it
 *   debug=1  the same groups as Go's legacy text
 *   debug=2  every thread: tid, name, state, labels, symbolized stack
 *   seconds=N  (debug=0) the change over N seconds, as Go's delta profiles
 *
 * A thread whose stack could not be taken ends with a "[stack unavailable]"
 * frame. The agent's own threads are not listed. Runs on an HTTP worker.
 */
#include "http/http.h"

#include "agent/agent.h"
#include "agent/symbols.h"
#include "agent/threads.h"
#include "encoder/encoder.h"

#include <stdlib.h>
#include <string.h>

struct group {
    int depth;
    uint32_t labels;
    int64_t count;
    uintptr_t pcs[THREADS_STACK_MAX + 1];
};

static int group_cmp(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    if (x->labels != y->labels)
        return x->labels < y->labels ? -1 : 1;
    return memcmp(x->pcs, y->pcs, (size_t)x->depth * sizeof x->pcs[0]);
}

/* Takes a dump and groups its threads by (stack, labels), sorted. Returns
 * a malloc'd array of *n groups, NULL on failure. */
static struct group *take_groups(size_t *n)
{
    struct thread_dump d;
    if (threads_dump(&d) != 0)
        return NULL;
    struct group *g = calloc(d.n ? d.n : 1, sizeof *g);
    if (!g) {
        threads_dump_free(&d);
        return NULL;
    }
    for (size_t i = 0; i < d.n; i++) {
        const struct thread_info *t = &d.threads[i];
        int depth = t->depth;
        memcpy(g[i].pcs, t->pcs, (size_t)depth * sizeof t->pcs[0]);
        if (t->status != THREAD_STACK_OK || depth == 0)
            g[i].pcs[depth++] = FRAME_UNAVAILABLE;
        g[i].depth = depth;
        g[i].labels = t->labels;
        g[i].count = 1;
    }
    size_t total = d.n;
    threads_dump_free(&d);
    qsort(g, total, sizeof *g, group_cmp);
    size_t out = 0;
    for (size_t i = 0; i < total; i++) {
        if (out > 0 && group_cmp(&g[out - 1], &g[i]) == 0)
            g[out - 1].count++;
        else if (out != i)
            g[out++] = g[i];
        else
            out++;
    }
    *n = out;
    return g;
}

/* later - earlier, in later (which is grown to hold groups only in
 * earlier, with negative counts; zero groups are dropped). */
static struct group *subtract(struct group *later, size_t *nl,
                              const struct group *earlier, size_t ne)
{
    struct group *r = calloc(*nl + ne + 1, sizeof *r);
    if (!r)
        return NULL;
    size_t i = 0, j = 0, n = 0;
    while (i < *nl || j < ne) {
        int c = i == *nl ? 1 : j == ne ? -1 : group_cmp(&later[i], &earlier[j]);
        if (c < 0) {
            r[n] = later[i++];
        } else if (c > 0) {
            r[n] = earlier[j++];
            r[n].count = -r[n].count;
        } else {
            r[n] = later[i++];
            r[n].count -= earlier[j++].count;
        }
        if (r[n].count != 0)
            n++;
    }
    free(later);
    *nl = n;
    return r;
}

static void serve_full_dump(struct request *r)
{
    struct thread_dump d;
    if (threads_dump(&d) != 0) {
        http_error(r, 500, "failed to collect profile");
        return;
    }
    struct pbuf out = {0};
    if (threads_dump_text(&d, &out) == 0)
        http_send_text(r, &out);
    else
        http_error(r, 500, "failed to collect profile");
    pbuf_free(&out);
    threads_dump_free(&d);
}

void handle_goroutine(struct request *r)
{
    int debug = http_param_debug(r);
    long seconds;
    if (http_param_delta_seconds(r, 1, debug, &seconds) != 0)
        return;
    if (debug >= 2) {
        serve_full_dump(r);
        return;
    }
    int64_t start = agent_now_ns();
    size_t n = 0;
    struct group *g = take_groups(&n);
    if (!g) {
        http_error(r, 500, "failed to collect profile");
        return;
    }
    if (seconds > 0) {
        if (http_wait(r, seconds) != 0) {
            free(g);
            http_error(r, 500, "context canceled");
            return;
        }
        size_t n1 = 0;
        struct group *g1 = take_groups(&n1);
        struct group *delta = g1 ? subtract(g1, &n1, g, n) : NULL;
        free(g);
        if (!delta) {
            if (!g1)
                http_error(r, 500, "failed to collect profile");
            else
                http_error(r, 500, "failed to compute delta");
            return;
        }
        g = delta;
        n = n1;
    }
    int64_t end = agent_now_ns();

    struct count_record *recs = calloc(n ? n : 1, sizeof *recs);
    if (!recs) {
        free(g);
        http_error(r, 500, "failed to collect profile");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        recs[i].pcs = g[i].pcs;
        recs[i].depth = g[i].depth;
        recs[i].count = g[i].count;
        recs[i].labels = g[i].labels;
    }
    struct pbuf out = {0};
    int err;
    if (debug != 0) {
        err = count_profile_text("goroutine", recs, n, &out);
        if (err == 0)
            http_send_text(r, &out);
    } else {
        err = count_profile_proto("goroutine", recs, n,
                                  seconds > 0 ? end : start,
                                  seconds > 0 ? end - start : 0, &out);
        if (err == 0)
            http_send_profile(r, seconds > 0 ? "goroutine-delta" : "goroutine",
                              &out);
    }
    if (err != 0)
        http_error(r, 500, "failed to collect profile");
    pbuf_free(&out);
    free(recs);
    free(g);
}

long goroutine_count(void)
{
    return threads_host_count();
}
