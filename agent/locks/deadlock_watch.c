/*
 * The deadlock watch: once a second, on the agent's watch thread
 * (process/watch.c), a pass over the wait notes (deadlock.c); only when a
 * noted wait has lasted PPROF_DEADLOCK_SECONDS does it look for cycles,
 * and it says each new one once on stderr, in one line naming the threads
 * (name and id), the functions they wait in and who holds what:
 *
 *   pprofagent: deadlock: "locker-a" (12) waits in take_ab for mutex
 *   0x5580 held by "locker-b" (13); "locker-b" (13) waits in take_ba for
 *   mutex 0x55c0 held by "locker-a" (12)
 *
 * A cycle is known by its threads and locks (deadlock_cycle_key); the last
 * WATCH_REMEMBERED are remembered, so a cycle that lasts (they do) is said
 * once. Agent threads only; allocates.
 */
#include "agent/locks/deadlock.h"

#include "agent/locks/contention.h"
#include "agent/log.h"
#include "agent/symbols/symbols.h"

#include <string.h>

#define WATCH_REMEMBERED 64
static uint64_t said[WATCH_REMEMBERED];
static size_t nsaid;

static int was_said(uint64_t key)
{
    size_t n = nsaid < WATCH_REMEMBERED ? nsaid : WATCH_REMEMBERED;
    for (size_t i = 0; i < n; i++)
        if (said[i] == key)
            return 1;
    said[nsaid++ % WATCH_REMEMBERED] = key;
    return 0;
}

static const char *kind_name(int kind)
{
    switch (kind) {
    case DEADLOCK_MUTEX: return "mutex";
    case DEADLOCK_RWLOCK: return "rwlock";
    default: return "futex";
    }
}

/* The name of the function at pc, "?" when unknown. Symbolizer locked. */
static const char *function_at(uintptr_t pc)
{
    struct sym_frame f[8];
    int n = pc ? symbols_resolve(pc, f, 8) : 0;
    return n > 0 && f[0].name ? f[0].name : "?";
}

static void say(const struct deadlock_group *g)
{
    char line[480];
    size_t len = log_snprintf(line, sizeof line, "deadlock:");
    symbols_lock();
    symbols_refresh();
    for (size_t i = 0; i < g->n && len < sizeof line; i++) {
        const struct deadlock_thread *t = &g->threads[i];
        const struct deadlock_thread *h = &g->threads[(i + 1) % g->n];
        len += log_snprintf(line + len, sizeof line - len,
                            "%s \"%s\" (%d) waits in %s for %s %p held by "
                            "\"%s\" (%d)",
                            i ? ";" : "", t->name, t->tid,
                            function_at(t->waits_in), kind_name(t->kind),
                            t->lock, h->name, t->held_by);
    }
    symbols_unlock();
    log_info("%s", line);
}

int deadlock_watch_tick(struct deadlock_report *out)
{
    if (opt_deadlock_seconds <= 0)
        return 0;
    int64_t min_ns = opt_deadlock_seconds * 1000000000LL;
    if (deadlock_longest_wait(contention_clock()) < min_ns)
        return 0;
    if (deadlock_look(min_ns, out) != 0)
        return 0;
    int fresh = 0;
    for (size_t i = 0; i < out->n; i++) {
        const struct deadlock_group *g = &out->groups[i];
        if (g->type != DEADLOCK_CYCLE || was_said(deadlock_cycle_key(g)))
            continue;
        say(g);
        fresh = 1;
    }
    if (!fresh) {
        deadlock_report_free(out);
        return 0;
    }
    /* What naming the functions loaded goes back, as after a request. */
    symbols_release();
    return 1;
}
