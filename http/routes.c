/*
 * The registry of endpoints: one row per name, with its handler, the
 * description shown on the index page, its count and its flags (http.h:
 * listed, a profile with a flame graph, long-running, delta, beside
 * /debug/pprof/), plus one route per custom profile (pprofagent.h), made
 * on the fly from agent/custom/custom.c's registry. The server, the index, the
 * flame graph and the fuzz targets all read it.
 * Adding an endpoint is adding a row here and a file with its handler.
 */
#include "http/http.h"

#include "agent/custom/custom.h"

#include <stdlib.h>
#include <string.h>

#define PROFILE (ROUTE_LISTED | ROUTE_PROFILE)

const struct route routes[] = {
    {"allocs", handle_allocs, "A sampling of all past memory allocations",
     heap_profile_count, PROFILE | ROUTE_DELTA, 0},
    {"heap", handle_heap,
     "A sampling of memory allocations of live objects. min_age=S keeps "
     "those older than S seconds (leaks).",
     heap_profile_count, PROFILE | ROUTE_DELTA, 0},
    {"peak", handle_peak,
     "The heap profile at the high-water mark of sampled in-use bytes "
     "since start (reset=1 starts a new period)",
     heap_peak_count, PROFILE, 0},
    {"block", handle_block,
     "Stack traces that led to blocking on synchronization primitives",
     block_count, PROFILE | ROUTE_DELTA, 0},
    {"mutex", handle_mutex, "Stack traces of holders of contended mutexes",
     mutex_count, PROFILE | ROUTE_DELTA, 0},
    {"goroutine", handle_goroutine,
     "Stack traces of all current goroutines (here: every thread of the "
     "process). Use debug=2 as a query parameter to export in the same "
     "format as an unrecovered panic.",
     goroutine_count, PROFILE | ROUTE_DELTA, 0},
    {"deadlock", handle_deadlock,
     "Cycles of threads waiting for each other's locks, and threads stuck "
     "behind a holder blocked elsewhere, for at least min_seconds (5)",
     deadlock_count, PROFILE, 0},
    {"cmdline", handle_cmdline,
     "The command line invoking the current program", NULL, ROUTE_LISTED, 0},
    /* A flame graph waits 10 s for a CPU profile: long enough for a
     * thousand samples of a busy thread, short enough to wait for. */
    {"profile", handle_profile,
     "CPU profile. You can specify the duration in the seconds GET "
     "parameter. After you get the profile file, use the go tool pprof "
     "command to investigate the profile.",
     NULL, PROFILE | ROUTE_LONG | ROUTE_CPU, 10},
    {"wall", handle_wall,
     "Wall-clock profile: every thread, running or blocked, labelled with "
     "its name, state and system call. You can specify the duration in "
     "the seconds GET parameter.",
     NULL, PROFILE | ROUTE_LONG, 10},
    {"trace", handle_trace,
     "A trace of execution of the current program. You can specify the "
     "duration in the seconds GET parameter. After you get the trace file, "
     "use the go tool trace command to investigate the trace.",
     NULL, ROUTE_LISTED | ROUTE_LONG, 0},
    {"symbol", handle_symbol,
     "Maps addresses to function names (used by pprof)", NULL, 0, 0},
    {"processes", handle_processes,
     "Every process of this service under the agent, with its address "
     "(pid ppid program URL per line)",
     NULL, 0, 0},
    {"flamegraph", handle_flamegraph,
     "Any profile as an interactive SVG flame graph: "
     "flamegraph?profile=NAME[&seconds=N][&sample_index=TYPE]",
     NULL, ROUTE_LONG, 0},
    {"threadcreate", handle_threadcreate,
     "Stack traces that led to the creation of new OS threads",
     threadcreate_count, PROFILE | ROUTE_DELTA, 0},
    {"stats", handle_stats, "The process at a glance (JSON)", NULL,
     ROUTE_BESIDE, 0},
    {"charts", handle_charts, "Live charts of /debug/stats", NULL,
     ROUTE_BESIDE, 0},
    {"memory", handle_memory, "Where the resident memory goes (a page; JSON with ?format=json)", NULL,
     ROUTE_BESIDE, 0},
};

const size_t route_count = sizeof routes / sizeof routes[0];

static long custom_count(const char *name)
{
    struct pprof_profile *p = custom_profile_find(name);
    return p ? custom_profile_keys(p) : 0;
}

static void custom_route(struct pprof_profile *p, struct route *out)
{
    *out = (struct route){custom_profile_name(p), handle_custom, "",
                          custom_count, ROUTE_LISTED, 0};
}

const struct route *routes_find(const char *name, int beside,
                                struct route *custom)
{
    for (size_t i = 0; i < route_count; i++)
        if (strcmp(routes[i].name, name) == 0)
            return !(routes[i].flags & ROUTE_BESIDE) == !beside ? &routes[i]
                                                                 : NULL;
    struct pprof_profile *p = custom && !beside ? custom_profile_find(name)
                                                : NULL;
    if (!p)
        return NULL;
    custom_route(p, custom);
    return custom;
}

static int by_name(const void *a, const void *b)
{
    const struct route *x = *(const struct route *const *)a;
    const struct route *y = *(const struct route *const *)b;
    return strcmp(x->name, y->name);
}

size_t routes_listed(const struct route **out, struct route *custom)
{
    size_t n = 0;
    for (size_t i = 0; i < route_count; i++)
        if (routes[i].flags & ROUTE_LISTED)
            out[n++] = &routes[i];
    size_t nc = custom_profile_count();
    for (size_t i = 0; i < nc && i < CUSTOM_MAX_PROFILES; i++) {
        custom_route(custom_profile_at(i), &custom[i]);
        out[n++] = &custom[i];
    }
    qsort(out, n, sizeof out[0], by_name);
    return n;
}
