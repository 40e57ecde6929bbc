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
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/cpu/cpu.h"
#include "agent/core/labels.h"
#include "agent/log.h"
#include "agent/stacks/stack.h"
#include "agent/symbols/symbols.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct agg_entry {
    uint32_t tid;
    uint32_t depth;
    uint32_t labels;
    int64_t weight;
    uintptr_t pcs[CPU_STACK_MAX];
};

struct cpu_agg {
    struct group_table entries; /* of struct agg_entry, by (tid, labels,
                                   stack); first */
    int oom;
};

struct cpu_agg *cpu_agg_new(void)
{
    return group_owner_new(sizeof(struct cpu_agg), sizeof(struct agg_entry));
}

void cpu_agg_free(struct cpu_agg *a)
{
    group_owner_free(a);
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

static int entry_eq(const void *ctx, size_t idx, const void *key)
{
    const struct agg_entry *e = group_at(ctx, idx);
    const struct cpu_sample *s = key;
    return e->tid == s->tid && e->depth == s->depth &&
           e->labels == s->labels &&
           memcmp(e->pcs, s->pcs, s->depth * sizeof *s->pcs) == 0;
}

void cpu_agg_add(const struct cpu_sample *s, void *arg)
{
    struct cpu_agg *a = arg;
    if (a->oom || s->depth == 0 || s->depth > CPU_STACK_MAX)
        return;
    int added;
    struct agg_entry *e =
        group_find_or_add(&a->entries, hash_sample(s), entry_eq, s, &added);
    if (!e) {
        a->oom = 1;
        return;
    }
    if (added) {
        e->tid = s->tid;
        e->depth = s->depth;
        e->labels = s->labels;
        memcpy(e->pcs, s->pcs, s->depth * sizeof *s->pcs);
    }
    e->weight += s->weight;
}

int64_t cpu_agg_total(const struct cpu_agg *a)
{
    int64_t t = 0;
    for (size_t i = 0; i < a->entries.n; i++)
        t += ((const struct agg_entry *)group_at(&a->entries, i))->weight;
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
    struct name_slot *nn = real_realloc(*names, (*n + 1) * sizeof *nn);
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

static int cpu_proto(const struct cpu_agg *a, int64_t period_ns,
                     int64_t time_nanos, int64_t duration_nanos, int64_t lost,
                     void (*name_of)(int, char *, size_t),
                     const char *comment, const char *note, struct pbuf *out)
{
    if (a->oom)
        return -ENOMEM;
    struct profile *p = profile_timed("cpu", period_ns, time_nanos,
                                      duration_nanos, comment);
    if (!p)
        return -ENOMEM;
    if (note && note[0])
        profile_comment(p, note);

    struct stack_encoder *se = stacks_begin(p);
    if (!se) {
        profile_free(p);
        return -ENOMEM;
    }
    struct name_slot *names = NULL;
    size_t nnames = 0;
    uint64_t ids[CPU_STACK_MAX];
    for (size_t i = 0; i < a->entries.n; i++) {
        const struct agg_entry *e = group_at(&a->entries, i);
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
    real_free(names);
    int err = profile_write_gzip(p, out);
    profile_free(p);
    return err;
}

/* Median of the signal handler's cost, in ns, from its histogram. */
static uint64_t handler_median_ns(void)
{
    uint64_t total = 0;
    for (int i = 0; i < CPU_HIST_BUCKETS; i++)
        total += __atomic_load_n(&cpu_counters.hist[i], __ATOMIC_RELAXED);
    if (total == 0)
        return 0;
    uint64_t seen = 0;
    for (int i = 0; i < CPU_HIST_BUCKETS; i++) {
        seen += __atomic_load_n(&cpu_counters.hist[i], __ATOMIC_RELAXED);
        if (seen * 2 >= total)
            return (uint64_t)i * CPU_HIST_STEP_NS + CPU_HIST_STEP_NS / 2;
    }
    return (uint64_t)CPU_HIST_BUCKETS * CPU_HIST_STEP_NS;
}

int cpu_write(const struct cpu_agg *a, int whole_run,
              const struct write_options *o, struct pbuf *out)
{
    uint64_t handled = cpu_counters.handled;
    uint64_t timed = cpu_counters.timed;
    char comment[384];
    if (whole_run)
        log_snprintf(comment, sizeof comment,
                     "pprofagent: whole-run CPU profile at %d Hz per thread "
                     "(signal %d); %llu samples, lost %llu; sampler %s",
                     opt_cpu_hz, cpu_signo, (unsigned long long)handled,
                     (unsigned long long)cpu_counters.lost,
                     cpu_sampler_why());
    else
        log_snprintf(comment, sizeof comment,
                     "pprofagent: %llu samples at %d Hz per thread (signal "
                     "%d), handler median %llu ns, mean %llu ns; lost %llu, "
                     "leaf-only during dlclose %llu, settled %llu; "
                     "sampler %s",
                     (unsigned long long)handled, opt_cpu_hz, cpu_signo,
                     (unsigned long long)handler_median_ns(),
                     (unsigned long long)(timed ? cpu_counters.handler_ns /
                                                      timed
                                                : 0),
                     (unsigned long long)cpu_counters.lost,
                     (unsigned long long)cpu_counters.shallow,
                     (unsigned long long)cpu_counters.settled,
                     cpu_sampler_why());
    log_debug("cpu profile: %s", comment + strlen("pprofagent: "));
    /* The agent's counters are its own business, not the profile's (Go's
     * carry none): /debug/stats and the index show them. */
    notes_set("cpu", comment + strlen("pprofagent: "));
    /* Threads the profile could not see: the one line a reader needs in
     * the profile itself. */
    char note[128] = "";
    int unseen = cpu_profile_unseen();
    if (unseen > 0)
        log_snprintf(note, sizeof note,
                     "pprofagent: %d threads block signal %d: not profiled",
                     unseen, cpu_signo);
    return cpu_proto(a, cpu_period_ns, o->time_nanos, o->duration_nanos,
                     (int64_t)cpu_counters.lost, cpu_thread_name, NULL, note,
                     out);
}
