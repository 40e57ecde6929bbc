/*
 * Table-driven stack walking: unwind tables compiled from each
 * loaded object's call-frame information ahead of time (cfi_parse.c,
 * cfi_tables.c), and a walker that needs nothing but those tables and the
 * thread's stack (cfi_walk.c): no lock, no allocation, no system call, no
 * call into the loader, every stack read checked against the stack's
 * bounds. See docs/unwind-tables.md for the design and its costs.
 *
 * The row layout names registers by role (stack pointer, frame pointer,
 * return address) rather than by DWARF number; what is particular to an
 * architecture (register numbers, the return address's place, the PLT's
 * expression, the signal frame's layout, a call's encoding) is in one
 * header per architecture, agent/stacks/cfi_x86_64.h today, chosen by
 * agent/stacks/cfi_arch.h.
 */
#ifndef PPROF_CFI_H
#define PPROF_CFI_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

/* How to find the canonical frame address (CFA: the stack pointer just
 * before the call that made the frame) at a range of addresses. */
enum cfi_cfa {
    CFI_CFA_UNKNOWN = 0, /* no rule the walker can use: frame pointers */
    CFI_CFA_SP,          /* sp + off */
    CFI_CFA_FP,          /* fp + off */
    CFI_CFA_DEREF_SP,    /* *(sp + off) */
    CFI_CFA_DEREF_FP,    /* *(fp + off) */
    CFI_CFA_PLT,         /* sp + 8, + 8 more when (pc & 15) >= off */
    CFI_CFA_SIGNAL,      /* a signal trampoline: registers in a ucontext at sp */
    CFI_CFA_END,         /* return address undefined: the outermost frame */
    CFI_CFA_SP_RA_REG,   /* sp + off, the return address in DWARF register
                          * fp_off (fp unchanged): usable only in a frame
                          * whose registers all came from a ucontext */
};

/* Where the caller's frame pointer is. */
enum cfi_fp {
    CFI_FP_SAME = 0,  /* unchanged */
    CFI_FP_AT_CFA,    /* saved at cfa + off */
    CFI_FP_AT_SP,     /* saved at sp + off */
    CFI_FP_AT_FP,     /* saved at fp + off */
    CFI_FP_UNKNOWN,   /* lost: later frames cannot use it */
};

/* One row: the rules from start (an offset from the object's load base)
 * up to the next row's start. The return address is always at
 * cfa + CFI_RA_AT_CFA, -8 on x86-64 (a frame whose information says
 * otherwise is CFI_CFA_UNKNOWN). 12 bytes. */
struct cfi_row {
    uint32_t start;
    uint8_t cfa;    /* enum cfi_cfa */
    uint8_t fp;     /* enum cfi_fp */
    int16_t fp_off;
    int32_t cfa_off;
};

/* ---- compiling (cfi_parse.c) --------------------------------------------- */

/* Where compiled rows go: a buffer the caller grows. grow() is called
 * with the number of rows needed and returns 0 or -1 (out of memory).
 * scratch() and unscratch() give and take back memory for the parser's
 * own work (the sorted list of .debug_frame's descriptions); scratch may
 * be NULL (then .debug_frame is not read). The parser itself never maps
 * memory: part of it runs in signal handlers. */
struct cfi_out {
    struct cfi_row *rows;
    size_t n, cap;
    int (*grow)(struct cfi_out *out, size_t need);
    void *(*scratch)(size_t bytes);
    void (*unscratch)(void *p, size_t bytes);
};

/*
 * Compiles the call-frame information that the .eh_frame_hdr section at
 * hdr describes (in memory, as loaded) into rows sorted by start, offsets
 * from base, for code in [text_lo, text_hi). Addresses outside any frame
 * description get CFI_CFA_UNKNOWN rows. Returns 0, or -1 when the header
 * has no usable search table (then no rows are kept). Reads only the
 * object's own loaded sections. Not async-signal-safe (grow may mmap).
 * Does not allocate through malloc.
 */
int cfi_parse_eh_frame_hdr(const uint8_t *hdr, uintptr_t base,
                           uintptr_t text_lo, uintptr_t text_hi,
                           struct cfi_out *out);

/*
 * cfi_parse_eh_frame_hdr with, in addition, the object's .debug_frame
 * section [dbg, dbg + dbg_size) as read from its file (NULL when it has
 * none): descriptions found only there (code built without unwind tables,
 * some hand-written assembly) get rows too. Either hdr or dbg may be NULL;
 * returns -1 when neither gives a description. Takes memory for its work
 * from out->scratch (never malloc). Not async-signal-safe.
 */
int cfi_parse_tables(const uint8_t *hdr, const uint8_t *dbg, size_t dbg_size,
                     uintptr_t base, uintptr_t text_lo, uintptr_t text_hi,
                     struct cfi_out *out);

/*
 * The rules in force at pc, found directly in the object's .eh_frame_hdr
 * at hdr (its code in [text_lo, text_hi)), for code loaded since the
 * tables were built. Returns 0 with *out, or -1 (no usable rule). Reads
 * the object's sections: the caller keeps the object from being unloaded
 * meanwhile. Async-signal-safe. Does not allocate. Makes no system call.
 */
int cfi_parse_lookup(const uint8_t *hdr, uintptr_t text_lo, uintptr_t text_hi,
                     uintptr_t pc, struct cfi_row *out);

/*
 * The start of the function whose frame description covers pc, for
 * naming code that has no symbol: the unwind tables describe every
 * function the compiler emitted. hdr is the .eh_frame_hdr section in an
 * image of the object (its file, read or mapped) where the header and the
 * descriptions sit as they are loaded (one segment: [lo, hi) of the
 * image); pc and *start are addresses in that image (hdr + the distance
 * from the header as loaded). Every read is checked against [lo, hi).
 * Returns 0, or -1 when no description covers pc. Not async-signal-safe
 * (never called there); does not allocate.
 */
int cfi_parse_function_start(const uint8_t *hdr, const uint8_t *lo,
                             const uint8_t *hi, uintptr_t pc,
                             uintptr_t *start);

/* ---- the published tables (cfi_tables.c) --------------------------------- */

/* Rows are found through a bucket index: index[b] is the row in force at
 * lo + b * CFI_BUCKET (or 0 when none is yet), so a lookup only searches
 * the rows between index[b] and index[b + 1]. */
#define CFI_BUCKET_SHIFT 6
#define CFI_BUCKET (1u << CFI_BUCKET_SHIFT)

/* Each object also has a small direct-mapped cache of the rows last found,
 * filled by walks (any thread, any context): one 64-bit word an entry,
 * (offset + 1) << 32 | row number, so an entry is written and read whole
 * and a race between two walks costs a miss, never a wrong row. Profiles
 * walk the same return addresses again and again; a hit replaces the
 * bucket scan (see docs/unwind-tables.md for the figures). */
#define CFI_CACHE_MIN 64
#define CFI_CACHE_MAX 4096

struct cfi_object {
    uintptr_t lo, hi; /* the object's executable range */
    uintptr_t base;   /* its load bias: row starts are offsets from it */
    const struct cfi_row *rows;
    const uint32_t *index; /* (hi - lo) / CFI_BUCKET + 2 entries */
    uint64_t *cache;       /* cache_mask + 1 entries, or NULL */
    uint32_t cache_mask;
    uint32_t nrows;
};

/* Each set has a direct-mapped cache of the common rules by code address
 * (CFI_RULES entries of 64 bits, filled by walks, read and written whole:
 * the layout is in cfi_walk.c), so that most frames need neither the
 * object nor its rows. It belongs to the set: a new set (objects loaded or
 * unloaded) starts empty, so an entry never outlives the code it
 * describes. */
#define CFI_RULES_SHIFT 12
#define CFI_RULES (1u << CFI_RULES_SHIFT)

struct cfi_set {
    size_t n;
    uint64_t *rules; /* CFI_RULES entries, in the set's own mapping */
    struct cfi_object objects[]; /* sorted by lo, not overlapping */
};

/* The bytes of a set of n objects with its rule cache. */
static inline size_t cfi_set_bytes(size_t n)
{
    return sizeof(struct cfi_set) + n * sizeof(struct cfi_object) +
           CFI_RULES * sizeof(uint64_t);
}

/*
 * A dl_iterate_phdr callback: the loader's counts of objects added and
 * removed (dlpi_adds, dlpi_subs) into data, an unsigned long long[2] left
 * as it is when the C library is too old to report them. Stops at the
 * first object: the counts are the same in every entry. Used by the
 * tables and by the program-header snapshot (phdr_cache.c) to see whether
 * anything changed since they were built. Not async-signal-safe (its
 * caller, dl_iterate_phdr, is not).
 */
static inline int cfi_phdr_counters(struct dl_phdr_info *info, size_t size,
                                    void *data)
{
    unsigned long long *v = data;
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) +
                    sizeof info->dlpi_subs) {
        v[0] = info->dlpi_adds;
        v[1] = info->dlpi_subs;
    }
    return 1;
}

/*
 * Brings the tables up to date with the loaded objects: compiles those
 * new since the last call, drops those gone, publishes the new set with
 * one atomic pointer swap and frees the old one once no walker can still
 * be reading it (waits for walks under way; walks never block). Calls the
 * C library's dl_iterate_phdr (the loader lock) and mmap. Returns the
 * number of objects known, -EBUSY when another thread is refreshing (the
 * tables are then marked stale for the next call), or -errno.
 * Not async-signal-safe.
 */
int cfi_tables_refresh(void);

/* Bytes of the published tables: rows, bucket indexes, row caches, and
 * the set itself with its rule cache. The writer's thread only. */
size_t cfi_tables_bytes(void);

/* Marks the tables out of date (a walk met code with no table); the next
 * cfi_tables_maybe_refresh() rebuilds. Async-signal-safe. */
extern int cfi_tables_stale;

/* cfi_tables_refresh() if something marked the tables out of date; while
 * the first build is deferred (cfi_tables_defer), only once the walks made
 * without tables have cost about what the build does (one frame looked up
 * per KiB of loaded code). Not async-signal-safe. */
int cfi_tables_maybe_refresh(void);

/* Defers the first build of the tables: until cfi_tables_refresh() is
 * called (by the deferred start, a CPU profile or a threads dump), captures
 * look each frame's rule up with _dl_find_object, and build the tables
 * from a host thread only when those lookups have cost about as much
 * (cfi_tables_maybe_refresh). A process that execs or exits within the
 * start delay (a compiler pass, a shell command) then never pays for
 * tables of its objects (cc1's took about 100 ms), and one that samples
 * thousands of stacks in it does not pay 20 times a walk's cost for each. */
void cfi_tables_defer(void);

/* In a forked child: forgets the walks of threads that did not come
 * along. Not async-signal-safe. */
void cfi_tables_fork_child(void);

/* Readers (walks) register in cfi_readers[epoch & 1] before they load the
 * set and unregister after; a writer swaps the pointer, then flips the
 * epoch twice, waiting each time for the old side to drain. */
extern struct cfi_set *cfi_current;
extern unsigned cfi_epoch;
extern int cfi_readers[2];

/* ---- walking (cfi_walk.c) ------------------------------------------------ */

/* Where a walk starts. uc: the ucontext_t the registers came from (a
 * signal handler's third argument), or NULL; with it, a leaf frame whose
 * return address is still in a register (a jump to an exception's
 * landing pad) is walked too. */
struct cfi_regs {
    uintptr_t pc, sp, fp;
    const void *uc;
};

/* Walk statistics, for tests and the benchmark. */
struct cfi_walk_counters {
    uint64_t fp_frames;   /* frames stepped by frame pointer (no usable rule) */
    uint64_t no_table;    /* frames whose code had no table */
    uint64_t no_bounds;   /* walks from a thread whose stack is unknown */
    uint64_t fp_found;    /* cfi_walk_copy: frame pointers found by scanning */
    uint64_t fp_lost;     /* cfi_walk_copy: walks ended for want of one */
    uint64_t cache_misses; /* rows not in the row cache (found by the scan) */
    uint64_t slow_frames;  /* frames the rule cache did not step (cfi_set.rules):
                            * not cached, or a walk's last */
};
extern struct cfi_walk_counters cfi_walk_counters;

/*
 * Walks the stack from regs into at most max code addresses, leaf first:
 * pcs[0] = regs->pc; then each caller's return address as it is (not
 * minus one). exact: regs->pc is the interrupted instruction itself (a
 * signal's context) rather than a return address. Every stack read lies
 * in [stack_lo, stack_hi); a read outside, a stack pointer that does not
 * grow, a zero return address or the outermost frame ends the walk.
 * Returns the number of addresses written; *full is set when the walk
 * stopped only because max was reached.
 * Async-signal-safe. Does not allocate. Makes no system call.
 */
int cfi_walk(const struct cfi_regs *regs, int exact, uintptr_t stack_lo,
             uintptr_t stack_hi, uintptr_t *pcs, int max, int *full);

/*
 * cfi_walk, writing call sites instead of return addresses: each caller's
 * return address minus one (the call instruction's last byte, which is
 * what profiles symbolize), and a frame whose pc is exact (the leaf when
 * exact is set, a frame interrupted by a signal) as it is. The CPU
 * sampler's form: no second pass over the addresses.
 * Async-signal-safe. Does not allocate. Makes no system call.
 */
int cfi_walk_sites(const struct cfi_regs *regs, int exact, uintptr_t stack_lo,
                   uintptr_t stack_hi, uintptr_t *pcs, int max, int *full);

/*
 * cfi_walk of another thread's stack, from a copy: [stack_lo, stack_hi)
 * is the stack as that thread sees it (stack_lo its stack pointer), copy
 * holds those bytes; regs->pc is exact (where the thread stopped) and
 * regs->fp is unknown (the kernel's /proc/PID/task/TID/syscall reports the
 * stack pointer and program counter only). Where a rule needs the frame
 * pointer, the frame's record (saved rbp, return address) is looked for
 * above its stack pointer and checked one frame further; when none is
 * found the walk ends there (cfi_walk_counters.fp_lost).
 * Async-signal-safe. Does not allocate. Makes no system call.
 */
int cfi_walk_copy(const struct cfi_regs *regs, uintptr_t stack_lo,
                  uintptr_t stack_hi, const void *copy, uintptr_t *pcs,
                  int max, int *full);

/*
 * cfi_walk_copy from a frame whose registers are all known (regs->pc a
 * return address, regs->sp the stack pointer after that return, regs->fp
 * the frame pointer there: a note a blocking call's hook made,
 * agent/threads/blocked.h), as call sites (each return address - 1, the first
 * too). Async-signal-safe. Does not allocate. Makes no system call.
 */
int cfi_walk_copy_sites(const struct cfi_regs *regs, uintptr_t stack_lo,
                        uintptr_t stack_hi, const void *copy, uintptr_t *pcs,
                        int max, int *full);

/*
 * cfi_walk from the caller of this function: pcs[0] is its return
 * address. Stack bounds are the calling thread's (cfi_stack_bounds);
 * returns 0 when they are unknown.
 * Async-signal-safe. Does not allocate. Makes no system call.
 */
int cfi_walk_here(uintptr_t *pcs, int max, int *full);

/*
 * The stack above a function of the calling thread, from its frame record
 * (frame: the function's __builtin_frame_address(0), which makes the
 * compiler keep one: its caller's frame pointer, then its return
 * address), as call sites (each return address - 1): pcs[0] is the call
 * the function's caller is in. 0 when the thread's stack bounds are
 * unknown or frame is not on its stack.
 * Async-signal-safe. Does not allocate. Makes no system call.
 */
int cfi_walk_frame(const void *frame, uintptr_t *pcs, int max, int *full);

/*
 * The calling thread's stack [lo, hi), in its thread-local storage (0
 * until learnt). cfi_stack_learn() finds them (pthread_getattr_np: reads
 * /proc for the main thread, may allocate): call it where a thread starts
 * or in normal context; not async-signal-safe. cfi_stack_bounds() returns
 * 0 with the bounds, or -1 when they were never learnt; async-signal-safe.
 */
extern __thread uintptr_t cfi_stack_lo, cfi_stack_hi
    __attribute__((tls_model("initial-exec")));
void cfi_stack_learn(void);

static inline int cfi_stack_bounds(uintptr_t *lo, uintptr_t *hi)
{
    if (!cfi_stack_hi)
        return -1;
    *lo = cfi_stack_lo;
    *hi = cfi_stack_hi;
    return 0;
}

#endif
