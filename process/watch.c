/*
 * The watch: one thread of the agent's own that looks, at a fixed period,
 * for what must be caught while it happens because nothing is left after:
 *
 * - every second, deadlocks (agent/locks/deadlock_watch.c: a pass over the
 *   lock waits noted by the interposers; a look only when one lasted
 *   PPROF_DEADLOCK_SECONDS); a new cycle is said once on stderr and, with
 *   PPROF_DUMP_DIR, its report and a threads dump are written there;
 * - with PPROF_DUMP_DIR, every WATCH_TICK_MS, the memory limit the process
 *   lives under (agent/heap/memory_limit.c): when what is charged to it
 *   crosses PPROF_MEMORY_DUMP_AT (90% of the limit by default), the heap
 *   and peak profiles and the memory breakdown are written (dump.c), once
 *   per crossing and at most once every PPROF_MEMORY_DUMP_GAP seconds, so
 *   that the evidence outlives the kernel's out-of-memory kill. The limit
 *   is found again every few seconds (a process can be moved, a limit
 *   written); none known is said once at debug level and nothing is done.
 *
 * Started by the deferred start (start.c) once the process lived the
 * start delay, in a process that serves or writes dumps; a forked child
 * starts its own. Its cost, measured, is in
 * docs/deadlock.md. After an attach (attach.c) it does the same, from
 * the attach's settings, and the detach ends it (watch_stop).
 */
#include "process/process.h"
#include "agent/core/real.h"

#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/cpu/cpu.h"
#include "agent/locks/deadlock.h"
#include "agent/guard.h"
#include "agent/log.h"
#include "agent/heap/memory.h"

#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_TICK_MS 200
#define LIMIT_EVERY (5000 / WATCH_TICK_MS)

static pid_t started_in; /* the process whose watch runs */
/* The thread; an attached agent's is joinable, ended by watch_stop (the
 * detacher). */
static struct agent_stoppable watcher;

/* PPROF_DUMP_DIR's work. */
static int dumps_on(void)
{
    return opt_dump_dir[0] != '\0';
}

/* ---- the memory limit --------------------------------------------------------- */

static struct memory_limit limit;
static int limit_said;     /* "no limit known" said */
static int above;          /* usage was over the mark at the last look */
static int64_t last_dump;  /* when the last memory dump was written, ns */

static int64_t mark_of(const struct memory_limit *l)
{
    if (opt_memory_dump_percent)
        return l->limit / 100 * opt_memory_dump_percent;
    return opt_memory_dump_bytes;
}

static void memory_tick(long tick)
{
    if (tick % LIMIT_EVERY == 0 && memory_limit_find(&limit) != 0 &&
        !limit_said) {
        limit_said = 1;
        log_debug("PPROF_DUMP_DIR: no memory limit known (no memory cgroup "
                  "limit in /proc/self/cgroup's folders); no heap dump "
                  "before an out-of-memory kill");
    }
    if (!limit.version)
        return;
    int64_t usage = memory_limit_usage(&limit);
    int64_t mark = mark_of(&limit);
    int now_above = usage >= 0 && usage >= mark;
    int64_t now = agent_now_ns();
    if (now_above && !above &&
        (!last_dump || now - last_dump >= opt_memory_dump_gap * 1000000000LL)) {
        char pressure[160], summary[1200];
        memory_limit_pressure(&limit, pressure, sizeof pressure);
        log_snprintf(summary, sizeof summary,
                     "usage %lld bytes of the %lld-byte limit (%s of %s, "
                     "cgroup v%d); the mark %lld bytes; pressure: %s\n",
                     (long long)usage, (long long)limit.limit, limit.file,
                     limit.dir, limit.version, (long long)mark,
                     pressure[0] ? pressure : "unknown");
        last_dump = now;
        int n = dump_memory(summary);
        log_info("memory: %lld MiB of the %lld MiB limit in use; %d files "
                 "written to %s",
                 (long long)(usage >> 20), (long long)(limit.limit >> 20), n,
                 opt_dump_dir);
    }
    above = now_above;
}

/* ---- the thread ------------------------------------------------------------------ */

SHELL_THREAD_MAIN(watch_thread, "pprof-watch")
static void *watch_thread_body(void *unused)
{
    (void)unused;
    /* Without dumps there is no memory to watch: one wake a second. */
    long period_ms = dumps_on() ? WATCH_TICK_MS : 1000;
    long deadlock_every = 1000 / period_ms;
    for (long tick = 0; !stoppable_told(&watcher); tick++) {
        struct timespec nap = {period_ms / 1000, period_ms % 1000 * 1000000L};
        if (tick % deadlock_every == 0 && opt_deadlock_seconds > 0) {
            struct deadlock_report r;
            if (deadlock_watch_tick(&r)) {
                if (dumps_on())
                    dump_deadlock(&r);
                deadlock_report_free(&r);
            }
        }
        if (dumps_on())
            memory_tick(tick);
        real_nanosleep(&nap, NULL);
    }
    return NULL;
}

void watch_start(void)
{
    /* With the server or the dumps only: a process that serves nothing
     * and writes nothing (PPROF_ADDR=off, a forked child with
     * PPROF_CHILDREN=off) gets no thread of the agent's. */
    int serving = opt_serve && (!children_is_forked ||
                                opt_children == CHILDREN_SERVE);
    if (started_in == getpid() || !(serving || opt_dump_dir[0]) ||
        (opt_deadlock_seconds <= 0 && !opt_dump_dir[0]))
        return;
    started_in = getpid();
    limit_said = above = 0;
    last_dump = 0;
    int err = stoppable_spawn(&watcher, watch_thread, start_attached);
    if (err)
        log_info("cannot start the watch thread (%s): no deadlock watch, no "
                 "memory-limit dumps",
                 log_errtext(-err));
}

void watch_stop(void)
{
    if (!watcher.joinable)
        return;
    stoppable_tell(&watcher);
    stoppable_join(&watcher);
    started_in = 0; /* a later attach starts it again */
}
