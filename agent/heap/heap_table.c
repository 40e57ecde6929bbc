/*
 * Live sampled allocations: the exact pointer -> (bucket, size) table that
 * makes sure no free of a sampled pointer is missed, the counting filter
 * that lets every other free skip it, and the heap buckets (stack, size)
 * with their four counters. agent/heap/heap.h explains the design.
 *
 * Entered from the slow paths of the malloc interposers on any host thread
 * (with the guard entered when a stack is captured), from the fork
 * handlers, and read by the HTTP workers through heap_buckets and
 * heap_table_stats(). Memory comes from mmap and the arena only; nothing
 * here may call the host's allocator or log on a hot path. Never entered
 * from a signal handler.
 */
#include "agent/heap/heap.h"
#include "agent/heap/fmath.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/core/array.h"
#include "agent/config.h"
#include "agent/core/labels.h"
#include "agent/core/own_memory.h"
#include "agent/spinlock.h"
#include "agent/stacks/stack.h"
#include "agent/stacks/stack_table.h"
#include "agent/symbols/symbols.h"
#include "agent/log.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

uint8_t heap_filter[1u << HEAP_FILTER_BITS];
static const uint8_t heap_filter_zeros[1u << HEAP_FILTER_BITS];
const uint8_t *heap_filter_read = heap_filter_zeros;
struct stack_table *heap_buckets;

#define SHARD_BITS 6
#define NSHARDS (1u << SHARD_BITS)
#define SHARD_MIN_SLOTS 256u
#define SHARD_MAX_SLOTS (1u << 24)
#define BUCKET_CAPACITY 65536

struct slot {
    uintptr_t ptr; /* 0: empty */
    struct stack_entry *bucket;
    uint64_t size;
    int64_t born_ns; /* when sampled (CLOCK_MONOTONIC_COARSE), for min_age */
};

/* One shard: open addressing with linear probing and backward-shift
 * deletion (no tombstones), grown by doubling. Everything under `lock`. */
struct shard {
    spinlock_t lock;
    uint32_t count;
    uint32_t nslots; /* power of two, 0 before first use */
    struct slot *slots;
} __attribute__((aligned(64)));

/* On one page (64 shards of 64 bytes): a fork takes every shard's lock in
 * its prepare step and gives it back after, a write to each page in the
 * parent and in the child, where every page written is a fault. */
static struct shard shards[NSHARDS] __attribute__((aligned(4096)));

static long stat_live, stat_sampled, stat_lost;
static size_t stat_table_bytes;

/* Sum of heap_table_weight() over the live samples: the in-use estimate
 * the peak follows. Raised by track(), lowered by heap_table_forget(). */
static int64_t inuse_estimate;

/* Fork safety: samples in flight (stack capture, bucket insert) hold
 * locks of the stack table and the arena; the prepare handler stops new
 * ones and waits for these to drain before taking every shard lock. */
static int forking FORK_STATE;
static int samplers_active FORK_STATE;

static inline struct shard *shard_of(uint64_t h)
{
    return &shards[(h >> (64 - HEAP_FILTER_BITS - SHARD_BITS)) &
                   (NSHARDS - 1)];
}

static inline uint32_t home_slot(uint64_t h, uint32_t nslots)
{
    return (uint32_t)(h >> 16) & (nslots - 1);
}

/* Adds delta (+1 or -1) to p's cell unless it is full (it then stays) or
 * the result would leave [0, HEAP_FILTER_FULL]. */
static void filter_add(const void *p, int delta)
{
    /* free reads the writable filter before any cell of it is raised: the
     * block is not handed out yet, so no free of it can be under way. */
    if (delta > 0 && heap_filter_read != heap_filter)
        __atomic_store_n(&heap_filter_read, heap_filter, __ATOMIC_RELEASE);
    uint8_t *cell = &heap_filter[heap_filter_index(p)];
    uint8_t v = __atomic_load_n(cell, __ATOMIC_RELAXED);
    while (v != HEAP_FILTER_FULL && (delta > 0 || v > 0) &&
           !__atomic_compare_exchange_n(cell, &v, (uint8_t)(v + delta), 1,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

void heap_filter_mark(const void *p)
{
    filter_add(p, 1);
}

void heap_filter_unmark(const void *p)
{
    filter_add(p, -1);
}

static struct slot *map_slots(uint32_t n)
{
    size_t len = (size_t)n * sizeof(struct slot);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    own_memory_add(m, len);
    __atomic_fetch_add(&stat_table_bytes, len, __ATOMIC_RELAXED);
    return m;
}

static void unmap_slots(struct slot *slots, uint32_t n)
{
    size_t len = (size_t)n * sizeof(struct slot);
    own_memory_remove(slots, len);
    munmap(slots, len);
    __atomic_fetch_sub(&stat_table_bytes, len, __ATOMIC_RELAXED);
}

double heap_scale(int64_t size, long rate)
{
    if (rate <= 1)
        return 1.0;
    return -1.0 / fm_expm1_neg(-((double)size + 1.0) / (double)rate);
}

uint64_t heap_table_weight(uint64_t size)
{
    if (opt_heap_rate <= 1)
        return size;
    return (uint64_t)((double)size * heap_scale((int64_t)size, opt_heap_rate) +
                      0.5);
}

int64_t heap_inuse_estimate(void)
{
    return __atomic_load_n(&inuse_estimate, __ATOMIC_RELAXED);
}

/* The coarse clock (a few ms resolution, read from the vDSO without a
 * system call): ages are asked for in seconds. */
static int64_t coarse_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void put(struct slot *slots, uint32_t nslots, const struct slot *s)
{
    uint32_t i = home_slot(heap_hash((void *)s->ptr), nslots);
    while (slots[i].ptr)
        i = (i + 1) & (nslots - 1);
    slots[i] = *s;
}

/* Doubles the shard (or creates it). Lock held. 0 or -ENOMEM. */
static int grow(struct shard *sh)
{
    uint32_t n = sh->nslots ? sh->nslots * 2 : SHARD_MIN_SLOTS;
    if (n > SHARD_MAX_SLOTS)
        return -ENOMEM;
    struct slot *slots = map_slots(n);
    if (!slots)
        return -ENOMEM;
    for (uint32_t i = 0; i < sh->nslots; i++)
        if (sh->slots[i].ptr)
            put(slots, n, &sh->slots[i]);
    if (sh->slots)
        unmap_slots(sh->slots, sh->nslots);
    sh->slots = slots;
    sh->nslots = n;
    return 0;
}

/* Adds p; returns 0 or -ENOMEM. The filter is raised before the entry is
 * visible, and both before the host gets p. */
static int track(void *p, struct stack_entry *bucket, uint64_t size,
                 int64_t born_ns)
{
    uint64_t h = heap_hash(p);
    struct shard *sh = shard_of(h);
    spin_lock(&sh->lock);
    /* Keep the load under 1/2 so that probes stay short. */
    if ((sh->count + 1) * 2 > sh->nslots && grow(sh) != 0 &&
        sh->count + 1 >= sh->nslots) {
        spin_unlock(&sh->lock);
        return -ENOMEM;
    }
    struct slot s = {(uintptr_t)p, bucket, size, born_ns};
    heap_filter_mark(p);
    put(sh->slots, sh->nslots, &s);
    sh->count++;
    spin_unlock(&sh->lock);
    __atomic_fetch_add(&stat_live, 1, __ATOMIC_RELAXED);
    return 0;
}

int heap_table_forget(const void *p, struct heap_live *out)
{
    uint64_t h = heap_hash(p);
    struct shard *sh = shard_of(h);
    spin_lock(&sh->lock);
    uint32_t mask = sh->nslots - 1;
    struct slot *slots = sh->slots;
    if (!slots) {
        spin_unlock(&sh->lock);
        return 0;
    }
    uint32_t i = home_slot(h, sh->nslots);
    while (slots[i].ptr && slots[i].ptr != (uintptr_t)p)
        i = (i + 1) & mask;
    if (!slots[i].ptr) {
        spin_unlock(&sh->lock);
        return 0;
    }
    out->bucket = slots[i].bucket;
    out->size = slots[i].size;
    out->born_ns = slots[i].born_ns;
    /* Backward-shift deletion: move up every later entry of the run
     * whose home slot is not cyclically in (i, j]. */
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!slots[j].ptr)
            break;
        uint32_t k = home_slot(heap_hash((void *)slots[j].ptr), sh->nslots);
        int stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays)
            continue;
        slots[i] = slots[j];
        i = j;
    }
    slots[i].ptr = 0;
    sh->count--;
    heap_filter_unmark(p);
    spin_unlock(&sh->lock);
    __atomic_fetch_sub(&stat_live, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&inuse_estimate, (int64_t)heap_table_weight(out->size),
                       __ATOMIC_RELAXED);
    return 1;
}

/* One shard's entries counted freed and taken out, under its lock. */
static long forget_shard(struct shard *sh)
{
    long n = 0;
    spin_lock(&sh->lock);
    for (uint32_t i = 0; i < sh->nslots; i++) {
        struct slot *sl = &sh->slots[i];
        if (!sl->ptr)
            continue;
        struct heap_live l = {sl->bucket, sl->size, sl->born_ns};
        heap_filter_unmark((void *)sl->ptr);
        heap_table_count_free(&l);
        __atomic_fetch_sub(&inuse_estimate,
                           (int64_t)heap_table_weight(l.size), __ATOMIC_RELAXED);
        sl->ptr = 0;
        n++;
    }
    sh->count = 0;
    spin_unlock(&sh->lock);
    return n;
}

long heap_table_forget_all(void)
{
    long n = 0;
    for (unsigned s = 0; s < NSHARDS; s++)
        n += forget_shard(&shards[s]);
    __atomic_fetch_sub(&stat_live, n, __ATOMIC_RELAXED);
    return n;
}

void heap_table_restore(void *p, const struct heap_live *l)
{
    if (track(p, l->bucket, l->size, l->born_ns) == 0) {
        __atomic_fetch_add(&inuse_estimate,
                           (int64_t)heap_table_weight(l->size),
                           __ATOMIC_RELAXED);
    } else {
        /* The allocation was counted; without an entry its free could not
         * be seen, so count it freed now and report the loss. */
        heap_table_count_free(l);
        __atomic_fetch_add(&stat_lost, 1, __ATOMIC_RELAXED);
    }
}

void heap_table_sample(void *p, size_t size, const void *frame)
{
    __atomic_fetch_add(&samplers_active, 1, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&forking, __ATOMIC_ACQUIRE)) {
        __atomic_fetch_sub(&samplers_active, 1, __ATOMIC_RELEASE);
        __atomic_fetch_add(&stat_lost, 1, __ATOMIC_RELAXED);
        return;
    }
    uintptr_t pcs[HEAP_STACK_MAX];
    int n = frame ? stack_capture_from(frame, pcs, HEAP_STACK_MAX)
                  : stack_capture(pcs, HEAP_STACK_MAX);
    if (n == 0) {
        pcs[0] = FRAME_UNKNOWN;
        n = 1;
    }
    struct stack_entry *e = stack_table_get(heap_buckets, pcs, n,
                                            heap_key(size, labels_current_id()));
    if (!e || track(p, e, size, coarse_now_ns()) != 0) {
        __atomic_fetch_add(&stat_lost, 1, __ATOMIC_RELAXED);
    } else {
        heap_peak_touch(e);
        stack_entry_add(e, HEAP_ALLOC_OBJECTS, 1);
        stack_entry_add(e, HEAP_ALLOC_BYTES, (int64_t)size);
        __atomic_fetch_add(&stat_sampled, 1, __ATOMIC_RELAXED);
        heap_peak_note(__atomic_add_fetch(&inuse_estimate,
                                          (int64_t)heap_table_weight(size),
                                          __ATOMIC_RELAXED));
    }
    __atomic_fetch_sub(&samplers_active, 1, __ATOMIC_RELEASE);
}

void heap_table_stats(struct heap_stats *out)
{
    out->live = __atomic_load_n(&stat_live, __ATOMIC_RELAXED);
    out->sampled = __atomic_load_n(&stat_sampled, __ATOMIC_RELAXED);
    out->lost = __atomic_load_n(&stat_lost, __ATOMIC_RELAXED);
    out->buckets = (long)stack_table_count(heap_buckets);
    out->table_bytes = __atomic_load_n(&stat_table_bytes, __ATOMIC_RELAXED);
}

int heap_table_live(struct heap_live **out, size_t *n)
{
    size_t cap = 0, len = 0;
    struct heap_live *v = NULL;
    for (unsigned i = 0; i < NSHARDS; i++) {
        struct shard *sh = &shards[i];
        for (;;) {
            /* Room first, outside the lock: a free() of our own buffer
             * could land in this very shard's slow path. */
            size_t want = len + __atomic_load_n(&sh->count, __ATOMIC_RELAXED);
            if (want > cap && ARRAY_RESERVE(v, cap, want + want / 4 + 64,
                                            64) != 0) {
                real_free(v);
                return -ENOMEM;
            }
            spin_lock(&sh->lock);
            if (len + sh->count > cap) {
                spin_unlock(&sh->lock);
                continue;
            }
            for (uint32_t j = 0; j < sh->nslots; j++) {
                const struct slot *s = &sh->slots[j];
                if (s->ptr)
                    v[len++] = (struct heap_live){s->bucket, s->size,
                                                  s->born_ns};
            }
            spin_unlock(&sh->lock);
            break;
        }
    }
    *out = v;
    *n = len;
    return 0;
}

int64_t heap_table_now_ns(void)
{
    return coarse_now_ns();
}

/* ---- fork ----------------------------------------------------------------- */

FORK_PATH void heap_table_fork_prepare(void)
{
    __atomic_store_n(&forking, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&samplers_active, __ATOMIC_SEQ_CST))
        sched_yield();
    for (unsigned i = 0; i < NSHARDS; i++)
        spin_lock(&shards[i].lock);
}

FORK_PATH void heap_table_fork_parent(void)
{
    for (unsigned i = 0; i < NSHARDS; i++)
        spin_unlock(&shards[i].lock);
    __atomic_store_n(&forking, 0, __ATOMIC_SEQ_CST);
}

FORK_PATH void heap_table_fork_child(void)
{
    /* The child keeps the parent's samples: its copies of the sampled
     * blocks are live in it too, and their frees must still be seen. */
    for (unsigned i = 0; i < NSHARDS; i++)
        spin_unlock(&shards[i].lock);
    FORK_SET(samplers_active, 0);
    __atomic_store_n(&forking, 0, __ATOMIC_SEQ_CST);
}

int heap_table_init(void)
{
    heap_buckets = stack_table_create(HEAP_NVALUES, BUCKET_CAPACITY);
    if (!heap_buckets)
        return -ENOMEM;
    return 0;
}

char heap_hidden_by[256];
/* The whole sentence, when the reason is not another allocator (an
 * attached agent); written before heap_hidden_by, read after it. */
static char heap_hidden_why[400];

void heap_hidden_set(const char *why)
{
    log_snprintf(heap_hidden_why, sizeof heap_hidden_why, "%s", why);
    log_snprintf(heap_hidden_by, sizeof heap_hidden_by, "%s", "attach");
}

void heap_hidden_text(char *buf, size_t size)
{
    if (heap_hidden_why[0]) {
        log_snprintf(buf, size, "%s", heap_hidden_why);
        return;
    }
    log_snprintf(buf, size,
                 "malloc in this process is %s's, loaded before the agent: "
                 "no allocation reaches the agent and the heap profiles are "
                 "empty; list libpprofagent.so first in LD_PRELOAD",
                 heap_hidden_by);
}
