/*
 * The objects the host loads while the agent is attached (docs/attach.md):
 * nothing of the agent runs inside the host's dlopen, so one thread of
 * the agent's looks every RESCAN_MS whether the loader added an object
 * (its count of additions, one step of dl_iterate_phdr) and, when it did,
 * brings the agent's view of the loaded objects up to date (the
 * program-header cache, the unwind tables, and with the generation the
 * symbols: nothing else would before the next CPU or wall profile, and
 * the heap profile's frames in the new object went without names) and
 * points the new objects' doors at the agent (attach_relocs_rescan).
 * That is done on this thread, never inside dl_iterate_phdr for the
 * lookups, and only for objects whose load has ended (attach_relocs.c).
 *
 * Started by the starter once an attach serves, ended by the detacher
 * before it puts the relocations back; runs with the guard entered and
 * every signal blocked (agent_thread_spawn), and is recorded as the
 * agent's so that no profile samples or lists it. Never in signal
 * context.
 */
#include "process/process.h"
#include "agent/core/real.h"

#include "agent/core/loader.h"
#include "agent/cpu/cpu.h"
#include "agent/guard.h"
#include "agent/stacks/cfi.h"
#include "agent/stacks/phdr_cache.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#define RESCAN_MS 250

/* Started by the starter, told to stop by the detacher, which then joins
 * it (within RESCAN_MS). */
static struct agent_stoppable rescanner;

/* Sleeps RESCAN_MS; 1 when asked to stop. */
static int nap(void)
{
    struct timespec ts = {0, RESCAN_MS * 1000000L};
    while (real_nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
    return stoppable_told(&rescanner);
}

/* The loader's count of additions at the last look. */
static unsigned long long seen_adds;

/* One look: the objects added since the last one noted, their doors
 * bound. */
static void look(void)
{
    unsigned long long v[2] = {0, 0};
    loader_iterate_phdr(cfi_phdr_counters, v);
    if (v[0] == seen_adds)
        return;
    seen_adds = v[0];
    phdr_cache_refresh(0);
    cfi_tables_refresh();
    /* -EAGAIN (an object unloaded meanwhile): the next look again. */
    if (attach_relocs_rescan() == -EAGAIN)
        seen_adds = ~0ULL;
}

SHELL_THREAD_MAIN(rescan_thread, "pprof-rescan")
static void *rescan_thread_body(void *arg)
{
    (void)arg;
    guard_enter();
    while (!nap())
        look();
    guard_leave();
    return NULL;
}

void attach_rescan_start(void)
{
    seen_adds = ~0ULL; /* an object loaded since the bind: the first look */
    stoppable_spawn(&rescanner, rescan_thread, 1);
}

void attach_rescan_stop(void)
{
    stoppable_tell(&rescanner);
    stoppable_join(&rescanner);
}
