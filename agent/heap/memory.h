/*
 * Where the process's resident memory goes (/debug/memory): the contract
 * between the reader of /proc/self/smaps and smaps_rollup (maps.c), the
 * classifier that adds the allocator's and the heap profiler's figures
 * (memory.c), the JSON writer (encoder/memory.c) and the route
 * (http/memory.c). docs/memory.md explains the classification.
 */
#ifndef PPROF_MEMORY_H
#define PPROF_MEMORY_H

#include <stddef.h>
#include <stdint.h>

/* ---- /proc/self/smaps (maps.c) -------------------------------------------- */


/* One mapping of /proc/self/smaps, as far as the classifier needs it. */
struct smaps_entry {
    uintptr_t start, limit;
    char perms[5];     /* "rw-p" */
    int named;         /* has a path or a [name] */
    int kind;          /* SMAPS_* below */
    int64_t rss;       /* Rss: */
    int64_t anonymous; /* Anonymous: */
};
enum { SMAPS_OTHER, SMAPS_HEAP, SMAPS_STACK, SMAPS_FILE };

/* Reads every mapping of /proc/self/smaps in address order. On success *out
 * is a malloc'd array of *n entries (free() it). Returns 0 or -errno.
 * Agent threads only. Not async-signal-safe. */
int maps_read_smaps(struct smaps_entry **out, size_t *n);

/* The totals of /proc/self/smaps_rollup, bytes (-1: not given). */
struct smaps_rollup {
    int64_t rss, pss, anon, file, shmem, swap;
};
/* Reads /proc/self/smaps_rollup. Returns 0 or -errno. Agent threads only.
 * Not async-signal-safe. */
int maps_read_rollup(struct smaps_rollup *out);

/* ---- the breakdown (memory.c) ----------------------------------------------- */

/* The allocator running the host, and its own figures (bytes; -1 when it
 * does not give one). */
struct allocator_view {
    const char *name; /* "glibc", "jemalloc", "tcmalloc" */
    /* glibc (mallinfo2) */
    int64_t arena, ordblks, hblks, hblkhd, uordblks, fordblks, keepcost;
    /* jemalloc (mallctl stats.*) and tcmalloc (MallocExtension) */
    int64_t allocated, active, resident, mapped, retained, metadata;
    int64_t heap_size, pageheap_free, pageheap_unmapped;
};

/* Non-overlapping parts of RSS, bytes; their sum is rss. */
struct memory_parts {
    int64_t malloc_inuse;      /* blocks the allocator has handed out */
    int64_t malloc_free;       /* resident free and fragmented bytes */
    int64_t malloc_mmapped;    /* glibc's mmapped large blocks */
    int64_t thread_stacks;     /* host threads' stacks, main included */
    int64_t agent;             /* the agent's own mappings and stacks */
    int64_t file_backed;       /* code, mapped files, shared memory */
    int64_t other_anonymous;   /* every other anonymous page */
};

struct memory_report {
    int64_t rss;                 /* smaps_rollup Rss */
    struct smaps_rollup rollup;
    struct memory_parts parts;
    /* the classes found in smaps */
    int64_t brk_heap_rss;        /* [heap]: glibc's main arena */
    int64_t arena_heaps_rss;     /* glibc's other arenas' heaps */
    long arena_heaps;            /* how many such heaps */
    int64_t stacks_rss;          /* stack-shaped mappings and [stack] */
    long stacks;
    int64_t anon_rss;            /* Anonymous of all mappings */
    /* the agent's own */
    int64_t agent_resident, agent_mapped;
    int64_t agent_stack_resident; /* of agent_resident */
    int64_t heap_table_mapped;    /* the heap profiler's pointer table */
    long agent_ranges_dropped;
    /* the allocator */
    struct allocator_view alloc;
    int64_t malloc_trimmable;    /* free bytes malloc_trim could give back */
    /* the heap profile's estimate of bytes in use and its standard error */
    int64_t sampled_inuse, sampled_stddev;
    long sampled_live;
    long heap_rate;
    int64_t time_ns;
};

/* Fills *out (read on an agent thread: /proc, the allocator's statistics
 * call, the heap table). Returns 0 or -errno (no smaps_rollup).
 * Not async-signal-safe. */
int memory_read(struct memory_report *out);

/* ---- the memory limit the process lives under (memory_limit.c) ---------- */

/* The smallest memory limit of this process's cgroup and its ancestors:
 * cgroup v2 memory.max and memory.high, or v1 memory.limit_in_bytes. */
struct memory_limit {
    int version;         /* 1 or 2; 0: no limit known */
    int64_t limit;       /* bytes */
    char dir[512];       /* the cgroup folder whose limit it is */
    char file[32];       /* which of its files set it */
};

/* Finds the limit now (the process may be moved to another cgroup, a
 * limit may be written). Returns 0, or -ENOENT when no limit is known.
 * Agent threads only. Not async-signal-safe. */
int memory_limit_find(struct memory_limit *out);
/* Bytes charged to the limit's cgroup now (memory.current or
 * memory.usage_in_bytes), or -1. Not async-signal-safe. */
int64_t memory_limit_usage(const struct memory_limit *l);
/* The memory pressure the kernel reports for the limit's cgroup (v2
 * memory.pressure) or the whole system (/proc/pressure/memory): its first
 * line ("some avg10=..."), "" when none. Not async-signal-safe. */
void memory_limit_pressure(const struct memory_limit *l, char *out,
                           size_t size);

#endif
