/*
 * The malloc family interposers. Every call is forwarded to the next
 * allocator in the lookup order (dlsym RTLD_NEXT: glibc, or jemalloc or
 * tcmalloc loaded as shared libraries), which stays in charge of memory;
 * this file only decides which allocations are sampled and makes sure the
 * free of a sampled pointer is seen (agent/heap/heap.h has the design).
 *
 * Entered on every host thread, before the constructor and after it, and
 * from the libraries working for the agent (libdw, libelf, zlib). The
 * agent's own code comes in through agent/core/real.h instead, to the
 * side of this file that forwards without sampling (below).
 * The fast paths have no side effect but the thread's byte countdown and
 * end in a tail call to the real function; everything else is out of line.
 * The slow paths check the reentrancy guard first: while it is set (the
 * agent's own work, its threads) nothing is sampled, but a free of a
 * sampled pointer is still taken out of the table, from any context.
 *
 * Bootstrap: dlsym itself may call calloc before the real functions are
 * known; those calls are served from a static buffer whose blocks are
 * recognised (through the filter, at no cost to the fast path) by free,
 * realloc and malloc_usable_size, and never released.
 *
 * Never: allocate through the host allocator, log, or take a lock on the
 * fast path.
 */
#include "agent/compiler.h"
#include "agent/config.h"
#include "agent/guard.h"
#include "agent/heap/heap.h"
#include "agent/log.h"
#include "agent/core/loader.h"
#include "agent/core/next_symbol.h"
#include "agent/core/arm.h"
#include "agent/core/real.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define NOINLINE __attribute__((noinline))



/* ---- bootstrap buffer ----------------------------------------------------- */

#define BOOT_SIZE (64 * 1024)
#define BOOT_HEADER 16

static char boot_buf[BOOT_SIZE] __attribute__((aligned(64)));
static size_t boot_used;

static inline int is_boot(const void *p)
{
    return (const char *)p >= boot_buf && (const char *)p < boot_buf + BOOT_SIZE;
}

/* Zeroed memory that is never reused, aligned to align (a power of two up
 * to 4096); the block's size sits in the 8 bytes before it. */
static void *boot_alloc(size_t n, size_t align)
{
    if (align < BOOT_HEADER)
        align = BOOT_HEADER;
    size_t used = __atomic_load_n(&boot_used, __ATOMIC_RELAXED);
    for (;;) {
        size_t start = (used + BOOT_HEADER + align - 1) & ~(align - 1);
        if (n > BOOT_SIZE || start + n > BOOT_SIZE)
            return NULL;
        if (__atomic_compare_exchange_n(&boot_used, &used, start + n, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            char *p = boot_buf + start;
            memcpy(p - sizeof(size_t), &n, sizeof n);
            heap_filter_mark(p);
            return p;
        }
    }
}

static size_t boot_size(const void *p)
{
    size_t n;
    memcpy(&n, (const char *)p - sizeof n, sizeof n);
    return n;
}

/* ---- the next allocator ----------------------------------------------------- */

static void *boot_malloc(size_t n);
static void boot_free(void *p);
static void *boot_calloc(size_t a, size_t b);
static void *boot_realloc(void *p, size_t n);
static int boot_posix_memalign(void **pp, size_t align, size_t n);
static void *boot_aligned_alloc(size_t align, size_t n);
static void *boot_memalign(size_t align, size_t n);
static void *boot_valloc(size_t n);
static void *boot_pvalloc(size_t n);
static size_t boot_usable_size(void *p);

/* Until resolved, each pointer leads to a stub that resolves them all. */
static void *(*next_malloc)(size_t) = boot_malloc;
static void (*next_free)(void *) = boot_free;
static void *(*next_calloc)(size_t, size_t) = boot_calloc;
static void *(*next_realloc)(void *, size_t) = boot_realloc;
static int (*next_posix_memalign)(void **, size_t, size_t) = boot_posix_memalign;
static void *(*next_aligned_alloc)(size_t, size_t) = boot_aligned_alloc;
static void *(*next_memalign)(size_t, size_t) = boot_memalign;
static void *(*next_valloc)(size_t) = boot_valloc;
static void *(*next_pvalloc)(size_t) = boot_pvalloc;
static size_t (*next_usable_size)(void *) = boot_usable_size;

/* glibc's own entry points, if dlsym cannot find the next allocator. */
extern void *__libc_malloc(size_t) __attribute__((weak));
extern void __libc_free(void *) __attribute__((weak));
extern void *__libc_calloc(size_t, size_t) __attribute__((weak));
extern void *__libc_realloc(void *, size_t) __attribute__((weak));
extern void *__libc_memalign(size_t, size_t) __attribute__((weak));

/* Aligned allocations through posix_memalign, for allocators that lack
 * memalign, aligned_alloc, valloc or pvalloc (jemalloc has no pvalloc: the
 * next pvalloc would then be glibc's, on a heap jemalloc does not own). */
static void *via_posix_memalign(size_t align, size_t n)
{
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (align & (align - 1)) {
        errno = EINVAL;
        return NULL;
    }
    void *p = NULL;
    int err = next_posix_memalign(&p, align, n);
    if (err) {
        errno = err;
        return NULL;
    }
    return p;
}

static size_t page_size(void)
{
    static size_t cached;
    if (!cached)
        cached = (size_t)sysconf(_SC_PAGESIZE);
    return cached;
}

static void *fallback_aligned_alloc(size_t align, size_t n)
{
    return via_posix_memalign(align, n);
}
static void *fallback_memalign(size_t align, size_t n)
{
    return via_posix_memalign(align, n);
}
static void *fallback_valloc(size_t n)
{
    return via_posix_memalign(page_size(), n);
}
static void *fallback_pvalloc(size_t n)
{
    size_t page = page_size();
    if (n > SIZE_MAX - page) {
        errno = ENOMEM;
        return NULL;
    }
    return via_posix_memalign(page, n ? (n + page - 1) & ~(page - 1) : page);
}

/* Where the object holding addr is mapped, to tell objects apart; NULL
 * when none. _dl_find_object (glibc 2.35) is a lookup in a sorted table;
 * dladdr also looks for the nearest symbol, scanning the object's whole
 * symbol table: 625,000 instructions of every process's start for
 * libc's, eight times. glibc's loader's name is a weak reference: musl's
 * loader has none (it would refuse the agent), and dladdr answers there. */
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
#pragma weak _dl_find_object
#endif

static const void *object_of(void *addr)
{
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
    struct dl_find_object o;
    if (_dl_find_object)
        return _dl_find_object(addr, &o) == 0 ? o.dlfo_map_start : NULL;
#endif
    Dl_info info;
    return dladdr(addr, &info) ? info.dli_fbase : NULL;
}

/* The next definition of name, if it lives in the same object as the next
 * malloc; NULL otherwise. */
STARTUP static void *next_in(const char *name, const void *base)
{
    void *f = next_symbol(name);
    if (!f)
        return NULL;
    const void *in = object_of(f);
    if (base && in && in != base)
        return NULL;
    return f;
}

static int resolve_state; /* 0 not yet, 1 under way, 2 done */

/* Resolves every next_* pointer once. Returns 0, or -EAGAIN when called
 * again from inside the resolution on the same thread (dlsym allocating):
 * the caller then serves the request from the bootstrap buffer. */
STARTUP static int resolve(void)
{
    if (__atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE) == 2)
        return 0;
    if (heap_tls.resolving)
        return -EAGAIN;
    int expected = 0;
    if (!__atomic_compare_exchange_n(&resolve_state, &expected, 1, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&resolve_state, __ATOMIC_ACQUIRE) != 2)
            sched_yield();
        return 0;
    }
    heap_tls.resolving = 1;
    void *m = next_symbol("malloc");
    void *f = next_symbol("free");
    void *c = next_symbol("calloc");
    void *r = next_symbol("realloc");
    const void *base = m ? object_of(m) : NULL;
    void *pm = next_in("posix_memalign", base);
    void *aa = next_in("aligned_alloc", base);
    void *ma = next_in("memalign", base);
    void *va = next_in("valloc", base);
    void *pv = next_in("pvalloc", base);
    void *us = next_in("malloc_usable_size", base);
    if (!m || !f || !c || !r) {
        m = (void *)__libc_malloc;
        f = (void *)__libc_free;
        c = (void *)__libc_calloc;
        r = (void *)__libc_realloc;
    }
    next_malloc = (void *(*)(size_t))m;
    next_free = (void (*)(void *))f;
    next_calloc = (void *(*)(size_t, size_t))c;
    next_realloc = (void *(*)(void *, size_t))r;
    if (pm)
        next_posix_memalign = (int (*)(void **, size_t, size_t))pm;
    next_aligned_alloc =
        aa ? (void *(*)(size_t, size_t))aa : fallback_aligned_alloc;
    next_memalign = ma ? (void *(*)(size_t, size_t))ma : fallback_memalign;
    next_valloc = va ? (void *(*)(size_t))va : fallback_valloc;
    next_pvalloc = pv ? (void *(*)(size_t))pv : fallback_pvalloc;
    if (us)
        next_usable_size = (size_t (*)(void *))us;
    heap_tls.resolving = 0;
    __atomic_store_n(&resolve_state, 2, __ATOMIC_RELEASE);
    return 0;
}

void malloc_hooks_init(void)
{
    resolve();
}

static void *boot_malloc(size_t n)
{
    if (resolve() == 0 && next_malloc != boot_malloc)
        return next_malloc(n);
    return boot_alloc(n, 16);
}
static void boot_free(void *p)
{
    if (resolve() == 0 && next_free != boot_free)
        next_free(p);
    /* else: only bootstrap blocks can exist yet; they are never freed */
}
static void *boot_calloc(size_t a, size_t b)
{
    if (resolve() == 0 && next_calloc != boot_calloc)
        return next_calloc(a, b);
    size_t n;
    if (__builtin_mul_overflow(a, b, &n))
        return NULL;
    return boot_alloc(n, 16); /* the buffer is zeroed and never reused */
}
static void *boot_realloc(void *p, size_t n)
{
    if (resolve() == 0 && next_realloc != boot_realloc)
        return next_realloc(p, n);
    return NULL; /* not reached: realloc() handles bootstrap blocks */
}
static int boot_posix_memalign(void **pp, size_t align, size_t n)
{
    if (resolve() == 0 && next_posix_memalign != boot_posix_memalign)
        return next_posix_memalign(pp, align, n);
    if (align > 4096 || (align & (align - 1)))
        return EINVAL;
    void *p = boot_alloc(n, align);
    if (!p)
        return ENOMEM;
    *pp = p;
    return 0;
}
static void *boot_aligned_alloc(size_t align, size_t n)
{
    if (resolve() == 0 && next_aligned_alloc != boot_aligned_alloc)
        return next_aligned_alloc(align, n);
    return boot_alloc(n, align <= 4096 ? align : 4096);
}
static void *boot_memalign(size_t align, size_t n)
{
    if (resolve() == 0 && next_memalign != boot_memalign)
        return next_memalign(align, n);
    return boot_alloc(n, align <= 4096 ? align : 4096);
}
static void *boot_valloc(size_t n)
{
    if (resolve() == 0 && next_valloc != boot_valloc)
        return next_valloc(n);
    return boot_alloc(n, 4096);
}
static void *boot_pvalloc(size_t n)
{
    if (resolve() == 0 && next_pvalloc != boot_pvalloc)
        return next_pvalloc(n);
    return boot_alloc((n + 4095) & ~(size_t)4095, 4096);
}
static size_t boot_usable_size(void *p)
{
    if (resolve() == 0 && next_usable_size != boot_usable_size)
        return next_usable_size(p);
    return 0;
}

/* ---- the two tests of the fast paths -------------------------------------- */

/*
 * Both are written so that each is one instruction with its branch
 * (docs/memory.md has the disassembly and the instruction counts): the
 * compiler turns neither C form into that (it loads, compares, then
 * stores the countdown; it loads the filter cell, then tests it).
 */

/* Takes need bytes off the thread's countdown: 1 while the sample point
 * is not reached, else 0 with the countdown wrapped (the slow path calls
 * countdown_undo). need > left is exactly the borrow of the subtraction. */
static inline __attribute__((always_inline)) int countdown(uint64_t need)
{
#if defined(__x86_64__)
    __asm__ goto("movq heap_tls@gottpoff(%%rip), %%rax\n\t"
                 "subq %0, %%fs:(%%rax)\n\t"
                 "jb %l[reached]"
                 : : "r"(need) : "rax", "cc", "memory" : reached);
    return 1;
reached:
    return 0;
#else
    uint64_t left = heap_tls.left;
    heap_tls.left = left - need;
    return need <= left;
#endif
}

static inline void countdown_undo(uint64_t need)
{
    heap_tls.left += need;
}

/* 0 when p is certainly not sampled (heap_filter_maybe as one compare). */
static inline __attribute__((always_inline)) int filter_maybe(const void *p)
{
#if defined(__x86_64__)
    __asm__ goto("cmpb $0, %0\n\t"
                 "jne %l[maybe]"
                 : : "m"(heap_filter_read[heap_filter_index(p)]) : "cc" : maybe);
    return 0;
maybe:
    return 1;
#else
    return heap_filter_maybe(p) != 0;
#endif
}

/* ---- slow paths ----------------------------------------------------------- */

/* The allocation p of n bytes reached the countdown (already undone):
 * maybe sample it. */
static NOINLINE void *sample_slow(void *p, size_t n)
{
    if (!p)
        return p;
    if (guard_active()) {
        /* The agent's own threads never sample: they come back here only
         * for allocations of OWN_BLOCK_MIN bytes or more (and once every
         * OWN_BLOCK_MIN bytes of small ones). */
        if (agent_tls.agent_thread)
            heap_tls.left = OWN_BLOCK_MIN - 1;
        return p;
    }
    /* Half a MiB allocated (by default) since the last: a process that
     * lives past the start delay starts the agent from here if nothing
     * else did (agent/core/arm.h). */
    arm_poke(ARM_LATE, 0);
    if (heap_sampler_take(n)) {
        guard_enter();
        /* The stack from this function's caller on: the table's and
         * the capture's frames are not walked. */
        heap_table_sample(p, n, __builtin_frame_address(0));
        guard_leave();
    }
    return p;
}

/* Counts n bytes against the countdown after the allocation was made. */
static inline void *account(void *p, size_t n)
{
    uint64_t need = (uint64_t)n + 1;
    if (likely(countdown(need)))
        return p;
    countdown_undo(need);
    return sample_slow(p, n);
}

/* A large block for an agent thread from mmap (heap_own_blocks.c has
 * why), or NULL: the host's allocator then serves it. Never for an
 * attached agent: its own code calls the C library's free directly (its
 * references bind there), and the objects whose relocations led here are
 * put back to the C library's free at the detach; either would hand it
 * a block it never made. */
static inline void *own_block(size_t n)
{
    if (likely(!agent_tls.agent_thread) || n < OWN_BLOCK_MIN ||
        config_attached)
        return NULL;
    heap_tls.left = OWN_BLOCK_MIN - 1;
    return heap_own_block_alloc(n);
}

static NOINLINE void *malloc_slow(size_t n)
{
    countdown_undo((uint64_t)n + 1);
    void *p = own_block(n);
    return p ? p : sample_slow(next_malloc(n), n);
}

static NOINLINE void *calloc_slow(size_t a, size_t b, size_t n)
{
    countdown_undo((uint64_t)n + 1);
    void *p = own_block(n); /* zeroed by mmap */
    return p ? p : sample_slow(next_calloc(a, b), n);
}

static NOINLINE void free_slow(void *p)
{
    if (is_boot(p) || heap_own_block_free(p))
        return;
    struct heap_live l;
    if (heap_table_forget(p, &l))
        heap_table_count_free(&l);
    next_free(p);
}

/* realloc of a block the filter may know (the countdown untouched). */
static NOINLINE void *realloc_slow(void *p, size_t n)
{
    if (is_boot(p)) {
        void *q = account(next_malloc(n ? n : 1), n);
        if (q) {
            size_t old = boot_size(p);
            memcpy(q, p, old < n ? old : n);
        }
        return q;
    }
    size_t own = heap_own_block_size(p);
    if (own) {
        if (n == 0) {
            heap_own_block_free(p);
            return NULL;
        }
        void *q = malloc(n);
        if (q) {
            memcpy(q, p, own < n ? own : n);
            heap_own_block_free(p);
        }
        return q;
    }
    /* The old block leaves the table before the allocator may hand its
     * address to another thread; it comes back if realloc fails. */
    struct heap_live l;
    int had = p && heap_table_forget(p, &l);
    void *q = next_realloc(p, n);
    if (had) {
        if (!q && n != 0) {
            heap_table_restore(p, &l);
            return NULL;
        }
        heap_table_count_free(&l);
    }
    return q ? account(q, n) : q;
}

/* realloc of an unsampled block that reached the countdown. */
static NOINLINE void *realloc_sample_slow(void *p, size_t n)
{
    countdown_undo((uint64_t)n + 1);
    void *q = own_block(n);
    if (q) {
        if (p) {
            size_t old = next_usable_size(p);
            memcpy(q, p, old < n ? old : n);
            next_free(p);
        }
        return q;
    }
    q = next_realloc(p, n);
    return q ? sample_slow(q, n) : q;
}

/* ---- the agent's own calls (agent/core/real.h) ------------------------------ */

/*
 * The door without its sampling, for the agent's own code when this is
 * the process's malloc: nothing counted down, nothing sampled, an agent
 * thread's large blocks from mmap as through the door, and a free (or
 * realloc) that finds the blocks the filter knows (bootstrap, own,
 * sampled) as the door's does.
 */
static void *agent_malloc(size_t n)
{
    void *p = own_block(n);
    return p ? p : next_malloc(n);
}

static void *agent_calloc(size_t a, size_t b)
{
    size_t n;
    void *p = __builtin_mul_overflow(a, b, &n) ? NULL : own_block(n);
    return p ? p : next_calloc(a, b);
}

static void agent_free(void *p)
{
    if (unlikely(filter_maybe(p))) {
        free_slow(p);
        return;
    }
    next_free(p);
}

static void *agent_realloc(void *p, size_t n)
{
    if (unlikely(filter_maybe(p)))
        return realloc_slow(p, n);
    void *q = own_block(n);
    if (!q)
        return next_realloc(p, n);
    if (p) {
        size_t old = next_usable_size(p);
        memcpy(q, p, old < n ? old : n);
        next_free(p);
    }
    return q;
}

static const struct real_allocator agent_allocator = {
    agent_malloc, agent_free, agent_calloc, agent_realloc,
};

/* Found by agent/core/real.c in its section, at load: no code of this
 * folder runs for it, and agent/core calls nothing above it. */
static const struct real_allocator *const agent_allocator_entry
    __attribute__((section("pprof_real_allocator"), used)) = &agent_allocator;

/* ---- interposers ---------------------------------------------------------- */

EXPORT COMMON_PATH void *malloc(size_t n)
{
    if (likely(countdown((uint64_t)n + 1)))
        return next_malloc(n);
    return malloc_slow(n);
}

EXPORT COMMON_PATH void free(void *p)
{
    if (unlikely(filter_maybe(p))) {
        free_slow(p);
        return;
    }
    next_free(p);
}

EXPORT COMMON_PATH void *calloc(size_t a, size_t b)
{
    size_t n;
    if (unlikely(__builtin_mul_overflow(a, b, &n)))
        return next_calloc(a, b); /* fails with ENOMEM, as the allocator's */
    if (likely(countdown((uint64_t)n + 1)))
        return next_calloc(a, b);
    return calloc_slow(a, b, n);
}

EXPORT COMMON_PATH void *realloc(void *p, size_t n)
{
    if (unlikely(filter_maybe(p)))
        return realloc_slow(p, n);
    if (likely(countdown((uint64_t)n + 1)))
        return next_realloc(p, n);
    return realloc_sample_slow(p, n);
}

EXPORT void *reallocarray(void *p, size_t a, size_t b)
{
    size_t n;
    if (__builtin_mul_overflow(a, b, &n)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, n);
}

EXPORT int posix_memalign(void **pp, size_t align, size_t n)
{
    int err = next_posix_memalign(pp, align, n);
    if (err == 0)
        *pp = account(*pp, n);
    return err;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    return account(next_aligned_alloc(align, n), n);
}

EXPORT void *memalign(size_t align, size_t n)
{
    return account(next_memalign(align, n), n);
}

EXPORT void *valloc(size_t n)
{
    return account(next_valloc(n), n);
}

EXPORT void *pvalloc(size_t n)
{
    return account(next_pvalloc(n), n);
}

EXPORT size_t malloc_usable_size(void *p)
{
    if (unlikely(heap_filter_maybe(p))) {
        if (is_boot(p))
            return boot_size(p);
        size_t own = heap_own_block_size(p);
        if (own)
            return own;
    }
    return next_usable_size(p);
}

STARTUP void heap_init(void)
{
    malloc_hooks_init();
    if (!opt_enable || opt_heap_rate == 0) {
        __atomic_store_n(&heap_enabled, -1, __ATOMIC_RELEASE);
        return;
    }
    if (heap_table_init() != 0) {
        log_info("heap profile off: no memory for its tables");
        __atomic_store_n(&heap_enabled, -1, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(&heap_enabled, 1, __ATOMIC_RELEASE);
}

/* ---- an allocator preloaded before the agent ------------------------------ */

/* This library's own malloc: the exported name may bind to another's. */
extern __typeof__(malloc) agent_own_malloc
    __attribute__((alias("malloc"), visibility("hidden"), copy(malloc)));



int malloc_hooks_check(void)
{
    void *bound = loader_sym(RTLD_DEFAULT, "malloc");
    if (!bound || bound == (void *)agent_own_malloc)
        return 0;
    Dl_info info;
    const char *who = loader_addr(bound, &info) && info.dli_fname &&
                              info.dli_fname[0]
                          ? info.dli_fname
                          : "another object";
    const char *base = strrchr(who, '/');
    log_snprintf(heap_hidden_by, sizeof heap_hidden_by, "%s",
                 base ? base + 1 : who);
    return 1;
}
