/*
 * The table of endpoints under /debug/pprof/: one row per name, with its
 * handler, the description shown on the index page and its count.
 * Adding an endpoint is adding a row here and a file with its handler.
 */
#include "http/http.h"

#include "agent/agent.h"

static long threadcreate_count(void)
{
    return __atomic_load_n(&threads_created, __ATOMIC_RELAXED);
}

const struct route routes[] = {
    {"allocs", handle_allocs, "A sampling of all past memory allocations",
     heap_profile_count, 1},
    {"heap", handle_heap,
     "A sampling of memory allocations of live objects. You can specify "
     "the gc GET parameter to run GC before taking the heap sample.",
     heap_profile_count, 1},
    {"peak", handle_peak,
     "The heap profile at the high-water mark of sampled in-use bytes "
     "since start (reset=1 starts a new period)",
     heap_peak_count, 1},
    {"block", handle_block,
     "Stack traces that led to blocking on synchronization primitives",
     block_count, 1},
    {"mutex", handle_mutex, "Stack traces of holders of contended mutexes",
     mutex_count, 1},
    {"goroutine", handle_goroutine,
     "Stack traces of all current goroutines (here: every thread of the "
     "process). Use debug=2 as a query parameter to export in the same "
     "format as an unrecovered panic.",
     goroutine_count, 1},
    {"cmdline", handle_cmdline,
     "The command line invoking the current program", NULL, 1},
    {"profile", handle_profile,
     "CPU profile. You can specify the duration in the seconds GET "
     "parameter. After you get the profile file, use the go tool pprof "
     "command to investigate the profile.",
     NULL, 1},
    {"wall", handle_wall,
     "Wall-clock profile: every thread, running or blocked, labelled with "
     "its name, state and system call. You can specify the duration in "
     "the seconds GET parameter.",
     NULL, 1},
    {"symbol", handle_symbol,
     "Maps addresses to function names (used by pprof)", NULL, 0},
    {"processes", handle_processes,
     "Every process of this service under the agent, with its address "
     "(pid ppid program URL per line)",
     NULL, 0},
    {"flamegraph", handle_flamegraph,
     "Any profile as an interactive SVG flame graph: "
     "flamegraph?profile=NAME[&seconds=N][&sample_index=TYPE]",
     NULL, 0},
    {"threadcreate", handle_threadcreate,
     "Stack traces that led to the creation of new OS threads",
     threadcreate_count, 1},
};

const size_t route_count = sizeof routes / sizeof routes[0];
