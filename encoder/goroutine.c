/*
 * The goroutine profile: every host thread of the process now (the native
 * meaning of Go's goroutine profile), taken by agent/threads/threads.c, as Go
 * writes it. debug=0 proto goroutine/count and debug=1 text group the
 * threads with the same stack and labels, the count how many share it;
 * debug=2 lists every thread as Go's full dump (threads.c). A thread whose
 * stack could not be taken ends with a "[stack unavailable]" frame. Runs
 * on the agent's server threads only.
 */
#include "encoder/encoder.h"
#include "agent/core/real.h"

#include "agent/stacks/stack.h"
#include "agent/symbols/symbols.h"
#include "agent/threads/threads.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct goroutine_group {
    int depth;
    uint32_t labels;
    int64_t count;
    uintptr_t pcs[THREADS_STACK_MAX + 1];
};

static int group_cmp(const void *a, const void *b)
{
    const struct goroutine_group *x = a, *y = b;
    int c = ORDER(x->depth, y->depth);
    if (c == 0)
        c = ORDER(x->labels, y->labels);
    return c ? c : memcmp(x->pcs, y->pcs, (size_t)x->depth * sizeof x->pcs[0]);
}

/* Groups the threads of d by (stack, labels), sorted. */
static int group(const struct thread_dump *d, struct goroutine_snapshot *s)
{
    struct goroutine_group *g = real_calloc(d->n ? d->n : 1, sizeof *g);
    if (!g)
        return -ENOMEM;
    for (size_t i = 0; i < d->n; i++) {
        const struct thread_info *t = &d->threads[i];
        int depth = t->depth;
        memcpy(g[i].pcs, t->pcs, (size_t)depth * sizeof t->pcs[0]);
        if (t->status != THREAD_STACK_OK || depth == 0)
            g[i].pcs[depth++] = FRAME_UNAVAILABLE;
        g[i].depth = depth;
        g[i].labels = t->labels;
        g[i].count = 1;
    }
    size_t total = d->n;
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
    s->groups = g;
    s->n = out;
    return 0;
}

int goroutine_take(struct goroutine_snapshot *s, int debug)
{
    *s = (struct goroutine_snapshot){.debug = debug};
    struct thread_dump *d = real_malloc(sizeof *d);
    if (!d)
        return -ENOMEM;
    if (threads_dump(d) != 0) {
        real_free(d);
        return -ENOMEM;
    }
    if (debug >= 2) {
        s->dump = d;
        return 0;
    }
    int err = group(d, s);
    threads_dump_free(d);
    real_free(d);
    return err;
}

int goroutine_subtract(struct goroutine_snapshot *later,
                       const struct goroutine_snapshot *earlier)
{
    size_t nl = later->n, ne = earlier->n;
    const struct goroutine_group *l = later->groups, *e = earlier->groups;
    struct goroutine_group *r = real_calloc(nl + ne + 1, sizeof *r);
    if (!r)
        return -ENOMEM;
    size_t i = 0, j = 0, n = 0;
    while (i < nl || j < ne) {
        int c = i == nl ? 1 : j == ne ? -1 : group_cmp(&l[i], &e[j]);
        if (c < 0) {
            r[n] = l[i++];
        } else if (c > 0) {
            r[n] = e[j++];
            r[n].count = -r[n].count;
        } else {
            r[n] = l[i++];
            r[n].count -= e[j++].count;
        }
        if (r[n].count != 0)
            n++;
    }
    real_free(later->groups);
    later->groups = r;
    later->n = n;
    return 0;
}

void goroutine_free(struct goroutine_snapshot *s)
{
    real_free(s->groups);
    if (s->dump) {
        threads_dump_free(s->dump);
        real_free(s->dump);
    }
    *s = (struct goroutine_snapshot){0};
}

int goroutine_write(const struct goroutine_snapshot *s,
                    const struct write_options *o, struct pbuf *out)
{
    if (s->dump)
        return threads_dump_text(s->dump, out);
    struct stack_record *recs = real_calloc(s->n ? s->n : 1, sizeof *recs);
    if (!recs)
        return -ENOMEM;
    for (size_t i = 0; i < s->n; i++)
        recs[i] = (struct stack_record){
            .pcs = s->groups[i].pcs,
            .depth = s->groups[i].depth,
            .values = {s->groups[i].count},
            .labels = s->groups[i].labels,
        };
    int err = count_write("goroutine", recs, s->n, o, out);
    real_free(recs);
    return err;
}
