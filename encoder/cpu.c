/*
 * The CPU profile: aggregates the samples drained from the handlers'
 * buffer (same thread, same stack -> one record with summed weights) and
 * encodes them as Go does: sample types samples/count and cpu/nanoseconds,
 * period cpu/nanoseconds, duration set; plus a "thread" label with the
 * thread's name on every sample, and the samples that could not be taken
 * as one [lost samples] record, as Go reports lostProfileEvent.
 *
 * Runs on the HTTP worker that owns the profile; allocates freely.
 */
#include "encoder/encoder.h"

#include "agent/agent.h"
#include "agent/cpu.h"
#include "agent/labels.h"
#include "agent/symbols.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct agg_entry {
    uint64_t hash;
    uint32_t tid;
    uint32_t depth;
    uint32_t labels;
    int64_t weight;
    uintptr_t pcs[CPU_STACK_MAX];
};

struct cpu_agg {
    struct agg_entry *entries;
    size_t n, cap;
    uint32_t *index; /* entry number + 1; 0 = free */
    size_t nindex;   /* power of two */
    int oom;
};

struct cpu_agg *cpu_agg_new(void)
{
    struct cpu_agg *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->nindex = 1024;
    a->index = calloc(a->nindex, sizeof *a->index);
    if (!a->index) {
        free(a);
        return NULL;
    }
    return a;
}

void cpu_agg_free(struct cpu_agg *a)
{
    if (!a)
        return;
    free(a->entries);
    free(a->index);
    free(a);
}

static uint64_t hash_sample(const struct cpu_sample *s)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ s->tid ^ ((uint64_t)s->depth << 40) ^
                 ((uint64_t)s->labels << 20);
    for (uint32_t i = 0; i < s->depth; i++) {
        h ^= s->pcs[i];
        h *= 0x100000001b3ULL;
        h ^= h >> 29;
    }
    return h;
}

static int grow_index(struct cpu_agg *a)
{
    size_t n = a->nindex * 2;
    uint32_t *idx = calloc(n, sizeof *idx);
    if (!idx)
        return -ENOMEM;
    for (size_t i = 0; i < a->n; i++) {
        size_t j = a->entries[i].hash & (n - 1);
        while (idx[j])
            j = (j + 1) & (n - 1);
        idx[j] = (uint32_t)i + 1;
    }
    free(a->index);
    a->index = idx;
    a->nindex = n;
    return 0;
}

void cpu_agg_add(const struct cpu_sample *s, void *arg)
{
    struct cpu_agg *a = arg;
    if (a->oom || s->depth == 0 || s->depth > CPU_STACK_MAX)
        return;
    uint64_t h = hash_sample(s);
    size_t j = h & (a->nindex - 1);
    while (a->index[j]) {
        struct agg_entry *e = &a->entries[a->index[j] - 1];
        if (e->hash == h && e->tid == s->tid && e->depth == s->depth &&
            e->labels == s->labels &&
            memcmp(e->pcs, s->pcs, s->depth * sizeof *s->pcs) == 0) {
            e->weight += s->weight;
            return;
        }
        j = (j + 1) & (a->nindex - 1);
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        struct agg_entry *ne = realloc(a->entries, cap * sizeof *ne);
        if (!ne) {
            a->oom = 1;
            return;
        }
        a->entries = ne;
        a->cap = cap;
    }
    struct agg_entry *e = &a->entries[a->n];
    e->hash = h;
    e->tid = s->tid;
    e->depth = s->depth;
    e->labels = s->labels;
    e->weight = s->weight;
    memcpy(e->pcs, s->pcs, s->depth * sizeof *s->pcs);
    a->index[j] = (uint32_t)++a->n;
    if (a->n * 2 > a->nindex && grow_index(a) != 0)
        a->oom = 1;
}

int64_t cpu_agg_total(const struct cpu_agg *a)
{
    int64_t t = 0;
    for (size_t i = 0; i < a->n; i++)
        t += a->entries[i].weight;
    return t;
}

/* Thread names, looked up once per thread id. */
struct name_slot {
    uint32_t tid;
    char name[32];
};

static const char *name_for(struct name_slot **names, size_t *n, uint32_t tid,
                            void (*name_of)(int, char *, size_t))
{
    for (size_t i = 0; i < *n; i++)
        if ((*names)[i].tid == tid)
            return (*names)[i].name;
    struct name_slot *nn = realloc(*names, (*n + 1) * sizeof *nn);
    if (!nn)
        return NULL;
    *names = nn;
    struct name_slot *sl = &nn[(*n)++];
    sl->tid = tid;
    sl->name[0] = '\0';
    if (name_of)
        name_of((int)tid, sl->name, sizeof sl->name);
    if (!sl->name[0])
        log_snprintf(sl->name, sizeof sl->name, "tid %u", tid);
    return sl->name;
}

int cpu_profile_proto(const struct cpu_agg *a, int64_t period_ns,
                      int64_t time_nanos, int64_t duration_nanos,
                      int64_t lost, void (*name_of)(int, char *, size_t),
                      const char *comment, struct pbuf *out)
{
    if (a->oom)
        return -ENOMEM;
    struct profile *p = profile_new();
    if (!p)
        return -ENOMEM;
    profile_sample_type(p, "samples", "count");
    profile_sample_type(p, "cpu", "nanoseconds");
    profile_period(p, "cpu", "nanoseconds", period_ns);
    profile_time(p, time_nanos, duration_nanos);
    if (comment && comment[0])
        profile_comment(p, comment);

    struct stack_encoder *se = stacks_begin(p);
    if (!se) {
        profile_free(p);
        return -ENOMEM;
    }
    struct name_slot *names = NULL;
    size_t nnames = 0;
    uint64_t ids[CPU_STACK_MAX];
    for (size_t i = 0; i < a->n; i++) {
        const struct agg_entry *e = &a->entries[i];
        size_t nids = stacks_locations(se, e->pcs, e->depth, ids);
        int64_t values[2] = {e->weight, e->weight * period_ns};
        const char *name = name_for(&names, &nnames, e->tid, name_of);
        struct profile_label labels[1 + LABELS_MAX_PAIRS];
        size_t nlabels = 0;
        if (name)
            labels[nlabels++] = (struct profile_label){.key = "thread",
                                                       .str = name};
        /* The host's labels (pprof_label_set); a "thread" key of its own
         * wins over the thread name. */
        const struct pprof_label_set *set = labels_by_id(e->labels);
        for (uint32_t k = 0; set && k < set->n; k++) {
            if (strcmp(set->pairs[k].key, "thread") == 0 && nlabels > 0 &&
                name) {
                labels[0].str = set->pairs[k].value;
                continue;
            }
            labels[nlabels++] = (struct profile_label){
                .key = set->pairs[k].key, .str = set->pairs[k].value};
        }
        profile_sample(p, ids, nids, values, 2, labels, nlabels);
    }
    if (lost > 0) {
        uintptr_t pc = FRAME_LOST;
        size_t nids = stacks_locations(se, &pc, 1, ids);
        int64_t values[2] = {lost, lost * period_ns};
        profile_sample(p, ids, nids, values, 2, NULL, 0);
    }
    stacks_end(se);
    free(names);
    int err = profile_write_gzip(p, out);
    profile_free(p);
    return err;
}
