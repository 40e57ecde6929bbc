/*
 * The heap profiler's contract between the malloc interposers
 * (malloc_hooks.c), the per-thread sampler (heap_sampler.c), the table of
 * live sampled allocations (heap_table.c) and the readers in encoder/heap.c
 * and http/heap.c.
 *
 * Sampling maths, in short. Each thread walks a Poisson process over the
 * bytes it allocates: the distance to the next sample point is drawn from
 * an exponential with mean R = PPROF_HEAP_RATE, and an allocation of n bytes
 * counts as n + 1 (so malloc(0) can be sampled too). An allocation is
 * sampled when a sample point falls inside it, which happens with
 * probability p(n) = 1 - exp(-(n + 1) / R); the distance is then drawn
 * afresh (the exponential is memoryless, so nothing is biased by where the
 * previous point fell). Samples are kept per (stack, requested size) and
 * every count of a bucket is multiplied by 1 / p(size) when a profile is
 * written, which makes each estimate unbiased. R = 1 records every
 * allocation and writes raw counts; R = 0 samples nothing.
 *
 * Free tracking. A sampled pointer goes into an exact address hash table
 * (64 shards, each a spinlocked open-addressing array that grows from mmap)
 * and bumps a counter in a 64 Ki-cell counting filter indexed by the
 * pointer's hash. free() reads that one counter: zero means "certainly not
 * sampled" (no false negatives: the counter is raised before the pointer is
 * returned to the host and lowered only when the pointer leaves the table),
 * non-zero sends the call to the slow path that looks the pointer up. A
 * pointer that cannot be tracked (no memory for the table) is not recorded
 * at all, so in-use figures never carry a free that was missed; it is
 * counted in heap_stats.lost and shown in the profile.
 */
#ifndef PPROF_HEAP_H
#define PPROF_HEAP_H

#include "agent/agent.h"

#include <stddef.h>
#include <stdint.h>

/* Counters of a heap bucket (a stack_table entry keyed by size). */
enum {
    HEAP_ALLOC_OBJECTS,
    HEAP_ALLOC_BYTES,
    HEAP_FREE_OBJECTS,
    HEAP_FREE_BYTES,
    HEAP_NVALUES
};

/* Frames kept per heap sample. */
#define HEAP_STACK_MAX 64

/* A bucket's stack_table key: the requested size in the low 48 bits, the
 * sampling thread's label set id (agent/labels.h) above, so that samples
 * taken under different labels stay apart. */
#define HEAP_KEY_SIZE_BITS 48
static inline uint64_t heap_key(uint64_t size, uint32_t labels)
{
    return (size & ((1ULL << HEAP_KEY_SIZE_BITS) - 1)) |
           ((uint64_t)labels << HEAP_KEY_SIZE_BITS);
}
static inline int64_t heap_key_size(uint64_t key)
{
    return (int64_t)(key & ((1ULL << HEAP_KEY_SIZE_BITS) - 1));
}
static inline uint32_t heap_key_labels(uint64_t key)
{
    return (uint32_t)(key >> HEAP_KEY_SIZE_BITS);
}

/* ---- per-thread sampler (heap_sampler.c) --------------------------------- */

/*
 * Per-thread sampling state in initial-exec TLS (never allocates).
 * `left` is the number of bytes (counted as n + 1 per allocation) before
 * the next sample point; 0 in a new thread, which sends its first
 * allocation to the slow path to seed the generator. Written only by its
 * own thread, outside signal handlers; a signal handler never reads it.
 */
struct heap_tls {
    uint64_t left;
    uint64_t rng;      /* xorshift state; 0 = not seeded yet */
    int resolving;     /* this thread is resolving the real_* pointers */
};
extern __thread struct heap_tls heap_tls
    __attribute__((tls_model("initial-exec")));

/* Decides, in the slow path, whether an allocation of n bytes is sampled,
 * and draws the next distance when it is (or seeds a new thread). Returns
 * 1 to sample. Not async-signal-safe (thread-local state). Does not
 * allocate. */
int heap_sampler_take(size_t n);

/* Draws a distance from an exponential with mean rate, as bytes (at least
 * 1), using and advancing *rng. Exposed for the unit tests.
 * Async-signal-safe. Does not allocate. */
uint64_t heap_sampler_draw(uint64_t *rng, long rate);

/* Natural logarithm of x > 0 (the agent does not depend on libm in the
 * allocation path). Exposed for the unit tests. Async-signal-safe. */
double heap_sampler_log(double x);

/* ---- counting filter (heap_table.c) -------------------------------------- */

#define HEAP_FILTER_BITS 16
extern uint32_t heap_filter[1u << HEAP_FILTER_BITS];

static inline uint64_t heap_hash(const void *p)
{
    return (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL;
}

/* Non-zero when p may be sampled (or is a bootstrap allocation); zero
 * means it certainly is not. Async-signal-safe. Does not allocate. */
static inline uint32_t heap_filter_maybe(const void *p)
{
    return __atomic_load_n(&heap_filter[heap_hash(p) >> (64 - HEAP_FILTER_BITS)],
                           __ATOMIC_RELAXED);
}

/* Raises or lowers p's filter cell, for pointers the free path must look at
 * that are not in the table (the bootstrap buffer's).
 * Async-signal-safe. Does not allocate. */
void heap_filter_mark(const void *p);

/* ---- live sampled allocations (heap_table.c) ----------------------------- */

/* The heap buckets: (stack, size) with HEAP_NVALUES counters. */
extern struct stack_table *heap_buckets;

/* A live sampled allocation taken out of the table. */
struct heap_live {
    struct stack_entry *bucket;
    uint64_t size;
    int64_t born_ns; /* CLOCK_MONOTONIC_COARSE when it was sampled */
};

/* Creates the bucket table and registers the fork handlers. Returns 0 or
 * -ENOMEM (heap sampling then stays off). Not async-signal-safe. */
int heap_table_init(void);

/* Records a sampled allocation of size bytes at p: captures the caller's
 * stack and tracks p. Call with the guard entered. Losses are counted.
 * Not async-signal-safe. */
void heap_table_sample(void *p, size_t size);

/* Takes p out of the table: returns 1 and fills *out when p was sampled, 0
 * otherwise. The free is not yet counted (see heap_table_count_free).
 * Not async-signal-safe (takes a shard's spinlock). Does not allocate. */
int heap_table_forget(const void *p, struct heap_live *out);

/* Puts back an allocation taken out by heap_table_forget (realloc failed).
 * Not async-signal-safe. */
void heap_table_restore(void *p, const struct heap_live *l);

/* Counts the free of an allocation taken out of the table.
 * Async-signal-safe. Does not allocate. */
static inline void heap_table_count_free(const struct heap_live *l)
{
    stack_entry_add(l->bucket, HEAP_FREE_OBJECTS, 1);
    stack_entry_add(l->bucket, HEAP_FREE_BYTES, (int64_t)l->size);
}

/* The unbiased estimate of the bytes one sampled allocation of size bytes
 * stands for: size / (1 - exp(-(size + 1) / rate)), rounded; size when
 * rate <= 1. The figure heap_inuse_estimate() adds up. Does not allocate. */
uint64_t heap_table_weight(uint64_t size);

/* Estimated bytes in use now: the sum of heap_table_weight() over every
 * live sampled allocation. Async-signal-safe. Does not allocate. */
int64_t heap_inuse_estimate(void);

/* Copies every live sampled allocation (bucket, size, time sampled) into
 * *out (malloc'd; free() it) and sets *n. Copies one shard at a time
 * under its lock, never allocating while holding it. Returns 0 or
 * -ENOMEM. Agent threads only. Not async-signal-safe. */
int heap_table_live(struct heap_live **out, size_t *n);

/* The clock of heap_live.born_ns (CLOCK_MONOTONIC_COARSE, ns), for ages.
 * Async-signal-safe. Does not allocate. */
int64_t heap_table_now_ns(void);

/* What the heap profiler knows about itself, for profiles and the index. */
struct heap_stats {
    long live;     /* sampled allocations tracked now */
    long sampled;  /* allocations sampled since start */
    long lost;     /* samples not recorded: no room for the stack or pointer */
    long buckets;  /* distinct (stack, size) buckets */
    size_t table_bytes; /* memory mapped for the pointer table's shards */
};
/* Async-signal-safe. Does not allocate. */
void heap_table_stats(struct heap_stats *out);

/* ---- the peak (heap_peak.c) ----------------------------------------------- */

/*
 * The in-use profile at the high-water mark of heap_inuse_estimate().
 * Host threads only compare the estimate with heap_peak_trigger after
 * a sample (heap_table.c) and, on a new high beyond the margin, wake the
 * agent's peak thread, which copies the bucket counters (a stack_snapshot)
 * off the host's path, at most once per HEAP_PEAK_MIN_INTERVAL_MS, and
 * keeps the copy with the largest in-use estimate. docs/memory.md has the
 * cost and how close to the true peak the copy gets.
 */
#define HEAP_PEAK_MIN_INTERVAL_MS 10
/* A copy is asked for when the estimate exceeds the kept copy's by 1/64. */
#define HEAP_PEAK_MARGIN_SHIFT 6

/* The estimate above which a host thread wakes the peak thread. Written
 * by the peak thread, read by sampling threads. */
extern int64_t heap_peak_trigger;

/* Called after a sample raised the estimate to inuse: keeps the exact
 * high-water mark and wakes the peak thread past the trigger (one futex
 * wake, only then). Does not allocate. Not async-signal-safe. */
void heap_peak_note(int64_t inuse);

/* Starts the peak thread (idempotent; again in a forked child, where it
 * no longer runs). Call from an agent thread or the constructor.
 * Not async-signal-safe. */
void heap_peak_start(void);

struct stack_snapshot;
/* The kept copy: moves a duplicate of it into *out (zeroed when none yet)
 * and fills the figures: the copy's in-use estimate, the exact high-water
 * mark of the estimate in the same period, when the copy was taken and
 * when the period began (ns since the epoch). reset starts a new period
 * after the copy is taken out. Returns 0 or -ENOMEM. Agent threads only.
 * Not async-signal-safe. */
struct heap_peak_info {
    int64_t copy_bytes;
    int64_t high_water_bytes;
    int64_t copy_time_ns;
    int64_t since_ns;
    long copies;       /* copies taken in this period */
    int64_t copy_cost_ns; /* the last copy's duration */
};
int heap_peak_get(struct stack_snapshot *out, struct heap_peak_info *info,
                  int reset);

/* ---- interposers (malloc_hooks.c) ---------------------------------------- */

/* Resolves the next allocator's functions (idempotent); the interposers
 * also resolve on first use. Not async-signal-safe. */
void malloc_hooks_init(void);

/* Called once by the constructor after config_load() and stack_init():
 * resolves the allocator, creates the tables and turns sampling on, or off
 * for good when PPROF_ENABLE=0, PPROF_HEAP_RATE=0 or memory is short.
 * Not async-signal-safe. */
void heap_init(void);

/* 1 when heap sampling is on, -1 when it is off (PPROF_HEAP_RATE=0,
 * PPROF_ENABLE=0 or no memory for the tables), 0 until the constructor has
 * decided. Written once by the constructor. */
extern int heap_enabled;

#endif
