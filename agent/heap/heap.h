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

#include "agent/compiler.h"
#include "agent/core/hash.h"
#include "agent/stacks/stack_table.h"

#include <stddef.h>
#include <stdint.h>

/* Counters of a heap bucket (a stack_table entry keyed by size). */
enum {
    HEAP_ALLOC_OBJECTS,
    HEAP_ALLOC_BYTES,
    HEAP_FREE_OBJECTS,
    HEAP_FREE_BYTES,
    /* The peak (heap_peak.c): the peak epoch this bucket last saw, and
     * its in-use objects when that epoch began. Not counters: a delta of
     * them means nothing, and no profile reads them but the peak. */
    HEAP_PEAK_EPOCH,
    HEAP_PEAK_OBJECTS,
    HEAP_NVALUES
};

/* Frames kept per heap sample. */
#define HEAP_STACK_MAX 64

/* A bucket's stack_table key: the requested size in the low 48 bits, the
 * sampling thread's label set id (agent/core/labels.h) above, so that samples
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
 * `left` is the number of bytes (counted as n + 1 per allocation) that
 * can still be allocated before the next sample point: the allocation
 * whose n + 1 exceeds it holds the point. The fast path subtracts n + 1
 * and branches on the borrow, so the slow path finds it wrapped and adds
 * n + 1 back first. 0 in a new thread, which sends its first allocation
 * to the slow path to seed the generator; UINT64_MAX when nothing is ever
 * sampled on this thread. Written only by its own thread, outside signal
 * handlers; a signal handler never reads it.
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

/* One byte a cell, a saturating count of the sampled blocks hashed there:
 * 64 KiB that free's one load reads at a random place, where 32-bit cells
 * (256 KiB) missed the caches often enough to cost a malloc-heavy
 * workload several percent of its time for six instructions. A cell that
 * reaches 255 stays there: false positives only (a table lookup), never a
 * missed free. */
#define HEAP_FILTER_BITS 16
#define HEAP_FILTER_FULL 255
extern uint8_t heap_filter[1u << HEAP_FILTER_BITS];

/* The filter free reads: until a cell is first raised, 64 KiB of zeros in
 * the agent's read-only data, which the kernel maps a whole 64 KiB window
 * at a time from the file; from then on heap_filter. The writable filter
 * is a fresh page of zeros at each of its 16 pages a process first reads:
 * touch, exec'd under a build, paid 16 page faults in free for a filter
 * nothing had been raised in. A pointer load where the array's address
 * was an lea: the same instruction count. */
extern const uint8_t *heap_filter_read __attribute__((visibility("hidden")));

static inline uint64_t heap_hash(const void *p)
{
    return (uint64_t)(uintptr_t)p * HASH_GOLDEN;
}

/* p's filter cell: Fibonacci hashing of the pointer's low 32 bits (the
 * high half of a 32-bit product), two instructions on free's fast path
 * (imul with an immediate, shift) where the 64-bit hash takes three.
 * Pointers that differ only above bit 31 share a cell: a false positive
 * costs a table lookup, never a missed free. */
static inline uint32_t heap_filter_index(const void *p)
{
    return ((uint32_t)(uintptr_t)p * 0x9e3779b1u) >> (32 - HEAP_FILTER_BITS);
}

/* Non-zero when p may be sampled (or is a bootstrap allocation); zero
 * means it certainly is not. Async-signal-safe. Does not allocate. */
static inline uint8_t heap_filter_maybe(const void *p)
{
    return __atomic_load_n(&heap_filter_read[heap_filter_index(p)],
                           __ATOMIC_RELAXED);
}

/* Raises or lowers p's filter cell, for pointers the free path must look at
 * that are not in the table (the bootstrap buffer's).
 * Async-signal-safe. Does not allocate. */
void heap_filter_mark(const void *p);

/* Lowers p's filter cell again (after heap_filter_mark).
 * Async-signal-safe. Does not allocate. */
void heap_filter_unmark(const void *p);

/* ---- the agent's own large blocks (heap_own_blocks.c) -------------------- */

/* Allocations of at least this many bytes on the agent's own threads come
 * from mmap, not from the host's allocator. */
#define OWN_BLOCK_MIN (128u * 1024)

/* A zeroed block of size bytes of the agent's own, marked in the filter so
 * that free() finds it; NULL when none can be mapped or the registry is
 * full (the caller then uses the host's allocator). Agent threads only.
 * Not async-signal-safe. */
void *heap_own_block_alloc(size_t size);
/* Unmaps p and returns 1 when it is an own block, else 0 (nothing done).
 * Not async-signal-safe (spinlock). Does not allocate. */
int heap_own_block_free(void *p);
/* The requested size of own block p, 0 when p is not one. */
size_t heap_own_block_size(const void *p);

/* ---- live sampled allocations (heap_table.c) ----------------------------- */

/* The heap buckets: (stack, size) with HEAP_NVALUES counters. */
extern struct stack_table *heap_buckets;

/* A live sampled allocation taken out of the table. */
struct heap_live {
    struct stack_entry *bucket;
    uint64_t size;
    int64_t born_ns; /* CLOCK_MONOTONIC_COARSE when it was sampled */
};

/* Creates the bucket table. Returns 0 or -ENOMEM (heap sampling then stays
 * off). Not async-signal-safe. */
int heap_table_init(void);
/* Fork (agent/fork.c, when heap_buckets exists): prepare waits for
 * samplers in flight and takes every shard's lock; parent and child
 * release them (the child keeps the parent's samples). */
void heap_table_fork_prepare(void);
void heap_table_fork_parent(void);
void heap_table_fork_child(void);

/* Records a sampled allocation of size bytes at p: captures the stack
 * above frame (an agent function's __builtin_frame_address(0); NULL: the
 * caller's) and tracks p. Call with the guard entered. Losses are
 * counted. Not async-signal-safe. */
void heap_table_sample(void *p, size_t size, const void *frame);

/* Takes p out of the table: returns 1 and fills *out when p was sampled, 0
 * otherwise. The free is not yet counted (see heap_table_count_free).
 * Not async-signal-safe (takes a shard's spinlock). Does not allocate. */
int heap_table_forget(const void *p, struct heap_live *out);

/* Counts every live sampled allocation freed and takes it out of the
 * table: the detach of an attached agent, after which frees no longer
 * reach it (process/attach.c). Returns how many. Not async-signal-safe
 * (takes each shard's spinlock). Does not allocate. */
long heap_table_forget_all(void);

/* Puts back an allocation taken out by heap_table_forget (realloc failed).
 * Not async-signal-safe. */
void heap_table_restore(void *p, const struct heap_live *l);


/* The unsampling rule, one copy for the estimate below and the heap
 * profiles (encoder/heap.c): the factor that turns a raw count of
 * allocations of size bytes into an unbiased estimate, when each is
 * sampled with probability 1 - exp(-(size + 1) / rate); 1 when rate <= 1.
 * Does not allocate. */
double heap_scale(int64_t size, long rate);

/* The unbiased estimate of the bytes one sampled allocation of size bytes
 * stands for: size x heap_scale(size, opt_heap_rate), rounded. The figure
 * heap_inuse_estimate() adds up. Does not allocate. */
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
 * The in-use profile at the high-water mark of heap_inuse_estimate(),
 * kept without a copy and without a thread: each new high starts a new
 * peak epoch (one atomic increment), and a bucket about to change for the
 * first time in an epoch first saves its in-use count (copy on write). At
 * any time a bucket's in-use at the peak is the saved count if it changed
 * since the last high, its current count otherwise. Every step runs on
 * the sampled paths only. docs/memory.md has the cost and accuracy.
 */
extern int64_t heap_peak_epoch;

/* Saves e's in-use count for the current epoch (out of line). */
void heap_peak_save(struct stack_entry *e, int64_t seen, int64_t epoch);

/* Call before changing e's counters. Does not allocate. Async-signal-safe. */
static inline void heap_peak_touch(struct stack_entry *e)
{
    int64_t epoch = __atomic_load_n(&heap_peak_epoch, __ATOMIC_ACQUIRE);
    int64_t seen = stack_entry_value(e, HEAP_PEAK_EPOCH);
    if (unlikely(seen != epoch))
        heap_peak_save(e, seen, epoch);
}

/* Counts the free of an allocation taken out of the table.
 * Async-signal-safe. Does not allocate. */
static inline void heap_table_count_free(const struct heap_live *l)
{
    heap_peak_touch(l->bucket);
    stack_entry_add(l->bucket, HEAP_FREE_OBJECTS, 1);
    stack_entry_add(l->bucket, HEAP_FREE_BYTES, (int64_t)l->size);
}

/* Called after a sample raised the estimate to inuse: on a new high,
 * records it and starts a new epoch. Does not allocate.
 * Not async-signal-safe. */
void heap_peak_note(int64_t inuse);

struct heap_record;
/* The peak's figures: the exact high-water mark of the estimate in this
 * period, when it was reached and when the period began (ns since the
 * epoch; 0: when the agent started), how many new highs the period had. */
struct heap_peak_info {
    int64_t high_water_bytes;
    int64_t time_ns;
    int64_t since_ns;
    long highs;
};
struct stack_snapshot;
/* From a snapshot of the heap buckets, each bucket's in-use objects at the
 * peak, written over its HEAP_ALLOC_OBJECTS (and 0 freed), so that
 * heap_records_from_snapshot() turns it into the peak profile; fills info.
 * reset starts a new period afterwards, from what is in use now.
 * Agent threads only. Not async-signal-safe. */
void heap_peak_apply(struct stack_snapshot *snap, struct heap_peak_info *info,
                     int reset);

/* ---- interposers (malloc_hooks.c) ---------------------------------------- */

/* Resolves the next allocator's functions (idempotent); the interposers
 * also resolve on first use. Not async-signal-safe. */
void malloc_hooks_init(void);

/* Whether the process's malloc is another allocator's, preloaded or linked
 * before the agent (LD_PRELOAD="libjemalloc.so.2 libpprofagent.so"): then
 * no allocation reaches the agent and the heap profiles stay empty. Sets
 * heap_hidden_by to that object's file name and returns 1; 0 when malloc
 * is the agent's. Not async-signal-safe. */
int malloc_hooks_check(void);
/* The object whose malloc hides the agent's ("" when none). Written once
 * by malloc_hooks_check before any reader runs. */
extern char heap_hidden_by[256];
/* The sentence that says so, for the profile, the index and stderr. */
void heap_hidden_text(char *buf, size_t size);
/* Makes why the sentence heap_hidden_text() gives, and the heap profiles
 * say it: an attached agent's, from when its malloc is bound (or that it
 * could not be). Not async-signal-safe. */
void heap_hidden_set(const char *why);

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
