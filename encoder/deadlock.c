/*
 * The deadlock report (/debug/pprof/deadlock, and the file the watch
 * writes): every cycle and stuck chain agent/locks/deadlock.c found.
 *
 * debug=1, text in the shape of Go's legacy profiles: a header, then per
 * group a line naming it and per thread a line saying what it waits for,
 * who holds that and for how long, its stack's addresses after " @" and
 * one "#\t0x..." line per symbolized frame:
 *
 *   deadlock profile: 1 cycle, 1 stuck chain (waits of at least 5 s)
 *
 *   cycle 1: 2 threads
 *   thread "locker-a" (12) waits 7.0 s in take_ab for mutex 0x5580 held by "locker-b" (13)
 *    @ 0x7f12 0x5581 ...
 *   #	0x5581	take_ab+0x3e	/src/x.c:20
 *
 * debug=0, a profile with one sample per thread (threads/count and
 * blocked/nanoseconds) labelled thread, waits_for (the lock), held_by (its
 * holder), blocked_seconds (numeric) and group ("cycle 1", "chain 1"); the
 * holder at the end of a chain carries blocked_in, its system call.
 * Runs on the agent's threads only; allocates.
 */
#include "encoder/encoder.h"

#include "agent/locks/contention.h"
#include "agent/locks/deadlock.h"
#include "agent/log.h"
#include "agent/stacks/stack.h"
#include "agent/symbols/symbols.h"
#include "agent/threads/threads.h"

#include <errno.h>
#include <stdlib.h>

static const char *kind_name(int kind)
{
    switch (kind) {
    case DEADLOCK_MUTEX: return "mutex";
    case DEADLOCK_RWLOCK: return "rwlock";
    case DEADLOCK_FUTEX_PI: return "PI futex";
    default: return "futex";
    }
}

/* The thread of g whose id is tid, or NULL. */
static const struct deadlock_thread *member(const struct deadlock_group *g,
                                            int tid)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->threads[i].tid == tid)
            return &g->threads[i];
    return NULL;
}

/* "\"name\" (tid)" into out. */
static void thread_words(const struct deadlock_group *g, int tid, char *out,
                         size_t size)
{
    const struct deadlock_thread *t = member(g, tid);
    log_snprintf(out, size, "\"%s\" (%d)", t ? t->name : "?", tid);
}

static const char *function_at(uintptr_t pc)
{
    struct sym_frame f[8];
    int n = pc ? symbols_resolve(pc, f, 8) : 0;
    return n > 0 && f[0].name ? f[0].name : "?";
}

static const char *call_name(long nr, char *buf, size_t size)
{
    const char *name = threads_syscall_name(nr);
    if (name)
        return name;
    log_snprintf(buf, size, "system call %ld", nr);
    return buf;
}

static void text_thread(const struct deadlock_group *g,
                        const struct deadlock_thread *t, struct pbuf *out)
{
    char who[64], holder[64], sc[32];
    thread_words(g, t->tid, who, sizeof who);
    if (t->kind) {
        thread_words(g, t->held_by, holder, sizeof holder);
        pbuf_printf(out, "thread %s waits %.1f s in %s for %s %p held by %s\n",
                    who, (double)t->blocked_ns / 1e9, function_at(t->waits_in),
                    kind_name(t->kind), t->lock, holder);
    } else {
        pbuf_printf(out, "thread %s holds what they wait for, %s", who,
                    threads_state_name(t->state));
        if (t->syscall >= 0)
            pbuf_printf(out, " in %s",
                        call_name(t->syscall, sc, sizeof sc));
        pbuf_printf(out, ", in %s\n", function_at(t->waits_in));
    }
    pbuf_puts(out, " @");
    for (int f = 0; f < t->depth; f++)
        pbuf_printf(out, " 0x%lx", (unsigned long)t->pcs[f]);
    pbuf_puts(out, "\n");
    for (int f = 0; f < t->depth; f++)
        stacks_describe(t->pcs[f], out);
    if (!t->depth)
        pbuf_puts(out, "#\t[stack unavailable]\n");
}

static int write_text(const struct deadlock_report *r, struct pbuf *out)
{
    size_t cycles = 0, chains = 0;
    for (size_t i = 0; i < r->n; i++)
        r->groups[i].type == DEADLOCK_CYCLE ? cycles++ : chains++;
    pbuf_printf(out,
                "deadlock profile: %zu cycle%s, %zu stuck chain%s (waits of "
                "at least %lld s)\n",
                cycles, cycles == 1 ? "" : "s", chains, chains == 1 ? "" : "s",
                (long long)(r->min_ns / 1000000000));
    stacks_text_begin();
    size_t nc = 0, nch = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct deadlock_group *g = &r->groups[i];
        int cycle = g->type == DEADLOCK_CYCLE;
        pbuf_printf(out, "\n%s %zu: %zu thread%s\n",
                    cycle ? "cycle" : "chain", cycle ? ++nc : ++nch, g->n,
                    g->n == 1 ? "" : "s");
        for (size_t j = 0; j < g->n; j++)
            text_thread(g, &g->threads[j], out);
    }
    stacks_text_end();
    pbuf_printf(out,
                "\n# pprofagent: %zu threads waiting on a followed lock now",
                r->waiting);
    if (!__atomic_load_n(&contention_on, __ATOMIC_RELAXED))
        pbuf_puts(out, "; lock waits are not followed (PPROF_BLOCK_RATE=0 "
                       "and PPROF_MUTEX_FRACTION=0)");
    if (r->slots_lost)
        pbuf_printf(out, "; %ld threads found no slot and are not followed",
                    r->slots_lost);
    pbuf_puts(out, "\n");
    return out->oom ? -ENOMEM : 0;
}

static int write_proto(const struct deadlock_report *r,
                       const struct write_options *o, struct pbuf *out)
{
    struct profile *p = profile_new();
    if (!p)
        return -ENOMEM;
    profile_sample_type(p, "threads", "count");
    profile_sample_type(p, "blocked", "nanoseconds");
    profile_period(p, "threads", "count", 1);
    profile_default_sample_type(p, "threads");
    profile_time(p, o->time_nanos ? o->time_nanos : r->time_ns, 0);
    struct stack_encoder *se = stacks_begin(p);
    if (!se) {
        profile_free(p);
        return -ENOMEM;
    }
    uint64_t ids[DEADLOCK_STACK_MAX + 1];
    size_t nc = 0, nch = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct deadlock_group *g = &r->groups[i];
        char group[32];
        int cycle = g->type == DEADLOCK_CYCLE;
        log_snprintf(group, sizeof group, "%s %zu", cycle ? "cycle" : "chain",
                     cycle ? ++nc : ++nch);
        for (size_t j = 0; j < g->n; j++) {
            const struct deadlock_thread *t = &g->threads[j];
            char who[64], holder[64], lock[48], sc[32];
            thread_words(g, t->tid, who, sizeof who);
            struct profile_label labels[6];
            size_t nl = 0;
            labels[nl++] = (struct profile_label){.key = "thread", .str = who};
            labels[nl++] = (struct profile_label){.key = "group", .str = group};
            if (t->kind) {
                thread_words(g, t->held_by, holder, sizeof holder);
                log_snprintf(lock, sizeof lock, "%s %p", kind_name(t->kind),
                             t->lock);
                labels[nl++] =
                    (struct profile_label){.key = "waits_for", .str = lock};
                labels[nl++] =
                    (struct profile_label){.key = "held_by", .str = holder};
                labels[nl++] = (struct profile_label){
                    .key = "blocked_seconds",
                    .num = t->blocked_ns / 1000000000,
                    .num_unit = "seconds"};
            } else if (t->syscall >= 0) {
                labels[nl++] = (struct profile_label){
                    .key = "blocked_in",
                    .str = call_name(t->syscall, sc, sizeof sc)};
            }
            uintptr_t unavailable = FRAME_UNAVAILABLE;
            size_t nids = t->depth
                              ? stacks_locations(se, t->pcs, (size_t)t->depth,
                                                 ids)
                              : stacks_locations(se, &unavailable, 1, ids);
            int64_t values[2] = {1, t->blocked_ns};
            profile_sample(p, ids, nids, values, 2, labels, nl);
        }
    }
    stacks_end(se);
    int err = profile_write_gzip(p, out);
    profile_free(p);
    return err;
}

int deadlock_write(const struct deadlock_report *r,
                   const struct write_options *o, struct pbuf *out)
{
    return o->debug ? write_text(r, out) : write_proto(r, o, out);
}
