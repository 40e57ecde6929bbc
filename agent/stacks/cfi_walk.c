/*
 * The table-driven stack walker. Entered from signal handlers,
 * interposed calls (malloc, pthread_mutex_lock, pthread_create) and the
 * agent's API, on any thread and in any state: it takes no lock, never
 * allocates, makes no system call and never calls into the loader. It
 * reads the published tables (cfi_tables.c, registered as a reader so they
 * are not unmapped under it) and the stack, and every stack read is
 * checked against the bounds the caller gives: a torn or garbage stack
 * ends the walk, never faults. Code memory is never read (signal
 * trampolines are known from their frame descriptions' 'S' augmentation).
 *
 * Where the tables have no usable rule (no table for the code, or a rule
 * the compiler wrote as a general expression) the frame is stepped with
 * the frame pointer, if it points into the stack: rbp -> saved rbp, return
 * address above it. That is also what libunwind does there.
 */
#include "agent/stacks/cfi.h"
#include "agent/core/real.h"

#include "agent/stacks/cfi_arch.h"
#include "agent/compiler.h"
#include "agent/cpu/cpu.h"
#include "agent/stacks/objects.h"
#include "agent/stacks/phdr_cache.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

struct cfi_walk_counters cfi_walk_counters;

/* Stack reads land anywhere in the stack, redzones included: not for the
 * address sanitizer to judge (the bounds are checked here). */
#define STACK_READER __attribute__((no_sanitize("address")))

/* The stack [lo, lo + span + 8), as the thread sees it; its bytes are at
 * addr + delta (0 for a walk of the live stack, the copy's offset for
 * cfi_walk_copy). One unsigned comparison checks both ends. */
struct bounds {
    uintptr_t lo, span;
    uintptr_t delta;
};

static inline PPROF_SIGNAL_SAFE struct bounds make_bounds(uintptr_t lo,
                                                          uintptr_t hi,
                                                          uintptr_t delta)
{
    struct bounds b = {lo, hi - lo - sizeof(uintptr_t), delta};
    if (hi < lo + sizeof(uintptr_t) || lo + sizeof(uintptr_t) < lo) {
        /* No stack: the only address that passes is a word of ours. */
        static const uintptr_t nothing;
        b.lo = (uintptr_t)&nothing;
        b.span = 0;
        b.delta = 0;
    }
    return b;
}

/* Reads the word at addr if it lies on the stack. An unaligned address
 * inside the bounds is read as it is (x86-64 and AArch64 load unaligned
 * words from ordinary memory); every slot real code saves is aligned, so a
 * garbage stack gains nothing from it, and the check cost 4 instructions
 * a read. */
static inline STACK_READER PPROF_SIGNAL_SAFE int peek(const struct bounds *b,
                                         uintptr_t addr, uintptr_t *out)
{
    if (addr - b->lo > b->span)
        return 0;
    *out = *(const uintptr_t *)(addr + b->delta);
    return 1;
}

static PPROF_SIGNAL_SAFE const struct cfi_object *
find_object(const struct cfi_set *set, uintptr_t pc)
{
    size_t lo = 0, hi = set->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pc < set->objects[mid].lo)
            hi = mid;
        else if (pc >= set->objects[mid].hi)
            lo = mid + 1;
        else
            return &set->objects[mid];
    }
    return NULL;
}

/* The row cache's slot for offset off (multiplicative hashing: return
 * addresses of one function differ in their low bits). */
static inline PPROF_SIGNAL_SAFE uint64_t *cache_slot(const struct cfi_object *o,
                                                     uint32_t off)
{
    return &o->cache[((off * 0x9e3779b1u) >> 16) & o->cache_mask];
}

static __attribute__((noinline)) PPROF_SIGNAL_SAFE const struct cfi_row *
find_row_slow(const struct cfi_object *o, uintptr_t pc, uint32_t off,
              uint64_t *misses)
{
    ++*misses;
    if (!o->nrows)
        return NULL;
    size_t b = (pc - o->lo) >> CFI_BUCKET_SHIFT;
    uint32_t lo = o->index[b], hi = o->index[b + 1];
    /* The last row in [lo, hi] whose start is <= off: a few rows at
     * most in a bucket of code, so a scan. */
    while (lo < hi && o->rows[lo + 1].start <= off)
        lo++;
    if (o->rows[lo].start > off)
        return NULL;
    __atomic_store_n(cache_slot(o, off), (uint64_t)(off + 1) << 32 | lo,
                     __ATOMIC_RELAXED);
    return &o->rows[lo];
}

/* o->cache is never NULL (cfi_tables.c: an object without rows has a
 * shared empty one that is never written). */
static inline PPROF_SIGNAL_SAFE const struct cfi_row *
find_row(const struct cfi_object *o, uintptr_t pc, uint64_t *misses)
{
    uint32_t off = (uint32_t)(pc - o->base);
    uint64_t e = __atomic_load_n(cache_slot(o, off), __ATOMIC_RELAXED);
    if (likely((uint32_t)(e >> 32) == off + 1))
        return &o->rows[(uint32_t)e];
    return find_row_slow(o, pc, off, misses);
}

/*
 * The rule cache (struct cfi_set.rules). Most frames of most stacks have
 * one of a few rules: the CFA is the stack pointer plus a constant (code
 * built without frame pointers, and every prologue) or the frame pointer
 * plus a constant (code with them), and the caller's frame pointer is
 * unchanged or saved a few words under the CFA. An entry holds such a rule
 * for one code address in one 64-bit word, which walks on any thread read
 * and write whole (a race costs a miss, never a wrong rule):
 *
 *   bits 28-63  (address >> CFI_RULES_SHIFT) + 1: with the slot, which is
 *               the address's low bits, the address exactly (below
 *               2^48 - 2^CFI_RULES_SHIFT); 0 is empty
 *   bit  27     RULE_END: the outermost frame
 *   bit  26     RULE_LOAD_FP: the caller's frame pointer is saved at the
 *               CFA - low (else it is unchanged)
 *   bit  24     RULE_FP: the CFA is the frame pointer plus the constant
 *               (else the stack pointer plus it)
 *   bits 16-23  low - 8, where the frame's reads (return address, saved
 *               frame pointer) lie in [CFA - low, CFA): low is 8, or where
 *               the frame pointer is saved (16 to 255)
 *   bits 0-15   the constant added to sp or fp
 *
 * A hit needs neither the object nor its rows, and its whole bounds test
 * is "sp + low <= CFA <= the stack's top": both reads then lie between the
 * stack pointer and the top, and a frame pointer holding anything (a CFA
 * that wraps) fails it. A RULE_SP rule goes in only when 8 <= low <= its
 * constant, so "constant >= 8" is its lower half; RULE_END (a RULE_SP
 * entry with a constant of 0) always fails that, and the outermost frame
 * is told from a bad one only on the way out. So does an empty entry,
 * which is what makes the tag test safe for any address: it compares 36
 * bits, so an address that is no user-space code (2^48 - 2^12 or above)
 * may alias another's entry, whose rule then reads only inside the
 * bounds, or the empty one, which fails.
 */
#define RULE_TAG_SHIFT 28
#define RULE_END ((uint64_t)1 << 27)
#define RULE_LOAD_FP ((uint64_t)1 << 26)
#define RULE_FP ((uint64_t)1 << 24)
#define RULE_LOW_SHIFT 16
/* Code addresses the tag holds (user space on x86-64 and AArch64). */
#define RULE_ADDR_LIMIT ((uintptr_t)1 << 47)

static inline PPROF_SIGNAL_SAFE uint64_t rule_tag(uintptr_t at)
{
    return (uint64_t)(at >> CFI_RULES_SHIFT) + 1;
}

/* 1 when entry e is the rule cache's entry for address at: the tag test
 * in four instructions ((at >> 12) + 1 compared in the entry's top 36
 * bits). */
static inline PPROF_SIGNAL_SAFE int rule_hit(uint64_t e, uintptr_t at)
{
    uint64_t key = (uint64_t)(at + ((uintptr_t)1 << CFI_RULES_SHIFT))
                   << (RULE_TAG_SHIFT - CFI_RULES_SHIFT);
    return ((e ^ key) >> RULE_TAG_SHIFT) == 0;
}

/* The rule cache's entry for row, the rule at code address at; 0 when the
 * row is not one the cache holds. */
static PPROF_SIGNAL_SAFE uint64_t rule_entry(const struct cfi_row *row,
                                             uintptr_t at)
{
    uint64_t flags = 0, low = (uint64_t)-CFI_RA_AT_CFA;
    if (at >= RULE_ADDR_LIMIT)
        return 0;
    if (row->cfa == CFI_CFA_END)
        return rule_tag(at) << RULE_TAG_SHIFT | RULE_END;
    if (row->cfa == CFI_CFA_FP)
        flags = RULE_FP;
    else if (row->cfa != CFI_CFA_SP)
        return 0;
    if (row->cfa_off < -CFI_RA_AT_CFA || row->cfa_off > 0xffff)
        return 0;
    if (row->fp == CFI_FP_AT_CFA) {
        if (row->fp_off > CFI_RA_AT_CFA || row->fp_off < -255)
            return 0;
        flags |= RULE_LOAD_FP;
        if ((uint64_t)-row->fp_off > low)
            low = (uint64_t)-row->fp_off;
        /* Under the stack pointer: an epilogue's popped slot, which the
         * general step keeps without reading. */
        if (!(flags & RULE_FP) && low > (uint64_t)row->cfa_off)
            return 0;
    } else if (row->fp != CFI_FP_SAME) {
        return 0;
    }
    return rule_tag(at) << RULE_TAG_SHIFT | flags |
           (low - 8) << RULE_LOW_SHIFT | (uint64_t)row->cfa_off;
}

/*
 * Steps the frames whose rules the rule cache holds, from r (*exact: r->pc
 * is the interrupted instruction, not a return address), writing their
 * code addresses at pcs[*n] on: the walk's common case, one bounds test a
 * frame. Stops at the first frame it cannot step (no rule cached, a read
 * outside the stack, a zero return address, max addresses written) with r
 * that frame's registers, for the general step. Returns 1 when it wrote
 * the outermost frame's address. Needs lo <= r->sp <= top (the stack's
 * [lo, top)), top below RULE_ADDR_LIMIT, and a known frame pointer.
 */
static inline __attribute__((always_inline)) STACK_READER PPROF_SIGNAL_SAFE int
rule_steps(const uint64_t *rules, uintptr_t delta, uintptr_t top,
           struct cfi_regs *r, int *exact, int sites, uintptr_t *pcs, int *n,
           int max)
{
    /* In locals, written back once: r may live in memory (the general
     * step takes its address). A walk of call sites keeps no pc (a
     * frame's return address is at + 1), nor the start of pcs (n comes
     * from what is left): fewer values live in the loop, none spilled. */
    uintptr_t pc = r->pc, sp = r->sp, fp = r->fp;
    uintptr_t *out = pcs + *n, *end = pcs + max;
    uintptr_t at = pc - 1 + (uintptr_t)*exact;
    int outermost = 0, first = *n;
    /* Entered only with room for a frame; the test is at the bottom. */
    if (out < end) do {
        uint64_t e = __atomic_load_n(&rules[at & (CFI_RULES - 1)],
                                     __ATOMIC_RELAXED);
        if (!rule_hit(e, at))
            break;
        uintptr_t off = (uint16_t)e, cfa;
        if (!(e & RULE_FP)) {
            /* low <= off: the lower bound holds once the constant is a
             * real one (an empty or RULE_END entry's is 0). */
            cfa = sp + off;
            if (unlikely(off < 8 || cfa > top)) {
                if (e & RULE_END) {
                    *out++ = sites ? at : pc;
                    outermost = 1;
                }
                break;
            }
        } else {
            cfa = fp + off;
            if (unlikely(cfa < sp + (uint8_t)(e >> RULE_LOW_SHIFT) + 8 ||
                         cfa > top))
                break;
        }
        uintptr_t ra = *(const uintptr_t *)(cfa + CFI_RA_AT_CFA + delta);
        if (!ra)
            break;
        if (e & RULE_LOAD_FP)
            fp = *(const uintptr_t *)(cfa - (uint8_t)(e >> RULE_LOW_SHIFT) -
                                      8 + delta);
        *out++ = sites ? at : pc;
        if (!sites)
            pc = ra;
        at = ra - 1;
        sp = cfa;
    } while (out < end);
    int now = max - (int)(end - out);
    if (now != first)
        *exact = 0;
    if (sites)
        pc = at + 1 - (uintptr_t)*exact;
    *n = now;
    r->pc = pc;
    r->sp = sp;
    r->fp = fp;
    return outermost;
}

/*
 * Code in no table (loaded since the tables were built: dlopen is not
 * interposed): its rule straight from its .eh_frame, found through the C
 * library's lock-free _dl_find_object. Registered as a reader of the
 * program-header protocol (agent/stacks/phdr_cache.c), so the dlclose hook does
 * not unmap an object while its sections are read here.
 */
static PPROF_SIGNAL_SAFE int rule_of_new_code(uintptr_t at,
                                              struct cfi_row *row)
{
    if (!agent_find_object)
        return -1;
    int ret = -1;
    __atomic_fetch_add(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&cpu_phdr_busy, __ATOMIC_SEQ_CST)) {
        struct dl_find_object fo;
        if (agent_find_object((void *)at, &fo) == 0 && fo.dlfo_eh_frame)
            ret = cfi_parse_lookup(fo.dlfo_eh_frame,
                                   (uintptr_t)fo.dlfo_map_start,
                                   (uintptr_t)fo.dlfo_map_end, at, row);
    }
    __atomic_fetch_sub(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    return ret;
}

/* One frame up by the frame pointer. */
static inline STACK_READER PPROF_SIGNAL_SAFE int by_frame_pointer(const struct bounds *b,
                                                     struct cfi_regs *r,
                                                     int fp_ok)
{
    uintptr_t ra, fp;
    if (!fp_ok || r->fp < r->sp || !peek(b, r->fp + 8, &ra) ||
        !peek(b, r->fp, &fp))
        return 0;
    r->sp = r->fp + 16;
    r->pc = ra;
    r->fp = fp;
    return 1;
}

/* The registers a signal trampoline's frame saved: the kernel put a
 * ucontext at the stack pointer the trampoline runs with. */
static inline STACK_READER PPROF_SIGNAL_SAFE int from_signal_frame(const struct bounds *b,
                                                      struct cfi_regs *r)
{
    uintptr_t uc = r->sp, pc, sp, fp;
    if (!peek(b, uc + CFI_UC_PC, &pc) || !peek(b, uc + CFI_UC_SP, &sp) ||
        !peek(b, uc + CFI_UC_FP, &fp))
        return 0;
    if (sp <= r->sp)
        return 0;
    r->pc = pc;
    r->sp = sp;
    r->fp = fp;
    return 1;
}

/* 1 when addr is a return address into code that has tables. */
static inline PPROF_SIGNAL_SAFE const struct cfi_object *
code_at(const struct cfi_set *set, uintptr_t addr)
{
    return set && addr ? find_object(set, addr - 1) : NULL;
}

#define RECORD_SCAN_WORDS 512
#define THREADS_TRIAL_MAX 64

static int trial_walk(const struct cfi_regs *regs, const struct bounds *b);

/*
 * The frame pointer of a frame whose rule needs it when the register is
 * not known (a walk from /proc's stack pointer and program counter, which
 * do not include rbp): the frame record (saved rbp, return address) that
 * the frame's prologue pushed, looked for upwards from its stack pointer:
 * a return address into code with tables from which the rest of the stack
 * walks cleanly to the outermost frame (or fills the walk). Stale records
 * left in the frame's uninitialized locals pass a one-frame check but
 * almost never end where the thread's stack ends. Returns 1 with *fp (the
 * record's address, the frame's rbp).
 */
/* 0 when the call just before return address ra is a direct call
 * (cfi_arch_direct_call) whose target does not lie in object o at or below at: then ra
 * was not pushed by a call into the frame being walked, and the record is
 * a stale one (main's uninitialized locals hold records of the calls made
 * before main, whose chains also end at _start). Indirect calls, and code
 * that cannot be read, pass. The five code bytes are read with
 * process_vm_readv on our own pid: it fails instead of faulting if the
 * object went away. Only the /proc walks (the agent's threads) get here:
 * a signal handler's walk has the frame pointer. */
/* Reads n bytes of code at addr; 0 when they cannot be read (the object
 * went away): process_vm_readv on our own pid fails instead of faulting. */
static PPROF_SIGNAL_SAFE int read_code(uintptr_t addr, void *out, size_t n)
{
    struct iovec local = {out, n};
    struct iovec remote = {(void *)addr, n};
    return real_syscall(SYS_process_vm_readv, (long)getpid(), &local, 1L, &remote,
                   1L, 0L) == (long)n;
}

/* Where a PLT stub at target jumps: "jmp *slot(%rip)" (ff 25 rel32),
 * after an endbr64 and a bnd prefix where present (.plt.sec, .plt.got, the
 * lazy .plt's entries), through its GOT slot. target itself when it is
 * not such a stub or its slot cannot be read. */
static PPROF_SIGNAL_SAFE uintptr_t through_plt(uintptr_t target)
{
    unsigned char c[11];
    if (!read_code(target, c, sizeof c))
        return target;
    size_t i = 0;
    if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
        i = 4; /* endbr64 */
    if (c[i] == 0xf2)
        i++; /* bnd */
    if (c[i] != 0xff || c[i + 1] != 0x25)
        return target;
    int32_t rel;
    memcpy(&rel, c + i + 2, sizeof rel);
    uintptr_t slot = target + i + 6 + (uintptr_t)(intptr_t)rel, to;
    if (!read_code(slot, &to, sizeof to) || !to)
        return target;
    return to;
}

static inline int at_entry(const struct cfi_row *r)
{
    return r->cfa == CFI_CFA_SP && r->cfa_off == 8;
}

/* 1 when target can be the entry of the function that contains at (both
 * in o): the rules at target are an entry's (cfa = sp + 8), and no other
 * function's prologue (a row with cfa = sp + 8 other than target's own,
 * followed by one that pushed something) lies between them. A stale
 * return address after a direct call to an earlier function (main's
 * helpers, called before the call being walked) fails here: that
 * function's epilogue and the next one's prologue come between. */
#define ENTRY_ROWS_MAX 256
static PPROF_SIGNAL_SAFE int entry_of(const struct cfi_object *o,
                                      uintptr_t target, uintptr_t at)
{
    uint64_t misses = 0;
    const struct cfi_row *r = find_row(o, target, &misses);
    if (!r || !at_entry(r))
        return 0;
    const struct cfi_row *first = r, *end = o->rows + o->nrows;
    uint32_t to = (uint32_t)(at - o->base);
    for (int n = 0; r + 1 < end && r[1].start <= to; r++, n++) {
        if (n == ENTRY_ROWS_MAX)
            return 0; /* far too long for one function's rows */
        if (r != first && at_entry(r) && r[1].cfa == CFI_CFA_SP &&
            r[1].cfa_off > 8)
            return 0;
    }
    return 1;
}

static PPROF_SIGNAL_SAFE int called_into(const struct cfi_set *set,
                                         const struct cfi_object *o,
                                         uintptr_t at, uintptr_t ra)
{
    unsigned char code[CFI_CALL_BYTES];
    uintptr_t target;
    if (!read_code(ra - CFI_CALL_BYTES, code, sizeof code) ||
        !cfi_arch_direct_call(code, ra, &target))
        return 1;
    /* A call through a PLT stub is a call to what the stub's GOT slot
     * holds: a stale record of a call into another object (the C
     * library's nanosleep, say) must not pass for one into this frame
     * because the stub itself lies below it. */
    target = through_plt(target);
    if (!o || find_object(set, target) != o || target > at)
        return 0;
    return entry_of(o, target, at);
}

static STACK_READER PPROF_SIGNAL_SAFE int find_record(const struct bounds *b,
                                                      const struct cfi_set *set,
                                                      const struct cfi_object *o,
                                                      uintptr_t at, uintptr_t sp,
                                                      uintptr_t *fp)
{
    for (uintptr_t a = (sp + 7) & ~(uintptr_t)7, i = 0;
         i < RECORD_SCAN_WORDS; a += 8, i++) {
        uintptr_t saved, ra;
        if (!peek(b, a, &saved) || !peek(b, a + 8, &ra))
            return 0;
        if (!code_at(set, ra) || !called_into(set, o, at, ra))
            continue;
        struct cfi_regs r = {ra, a + 16, saved, NULL};
        if (trial_walk(&r, b)) {
            *fp = a;
            return 1;
        }
    }
    return 0;
}

/* Adds a walk's counts to cfi_walk_counters (all its fields are
 * uint64_t). */
static PPROF_SIGNAL_SAFE void counters_add(const struct cfi_walk_counters *c)
{
    const uint64_t *from = (const uint64_t *)c;
    uint64_t *to = (uint64_t *)&cfi_walk_counters;
    for (size_t i = 0; i < sizeof *c / sizeof *from; i++)
        if (from[i])
            __atomic_fetch_add(&to[i], from[i], __ATOMIC_RELAXED);
}

/* What a walk is asked and where it stands, for the general step: the
 * frame's registers, what is known of them, where the addresses go, and
 * how the walk ended. */
struct walk_args {
    const struct cfi_regs *regs; /* where the walk starts */
    struct cfi_regs r;           /* the frame being stepped */
    const struct bounds *b;
    const struct cfi_set *set;
    int exact; /* r.pc is the exact address (a signal's, the first frame) */
    int fp_ok; /* r.fp is known */
    int scan;  /* find_record may look for a frame record where it is not */
    int sites; /* write call sites (a return address minus one) */
    int trial; /* find_record's trial: a zero return address is no end */
    uintptr_t *pcs;
    int n, max; /* addresses written, room */
    int full;   /* out: the walk stopped at max */
    int clean;  /* out: the walk reached the outermost frame */
};

/* The general step's state besides its arguments. */
struct walk_step {
    uint64_t *rules; /* the set's rule cache, or NULL */
    uintptr_t top;
    /* The ucontext that frame number uc_n (counted from 1) has all its
     * registers in: the caller's (read directly) or a signal frame's on
     * the stack (read within the bounds). */
    uintptr_t uc;
    int uc_n, uc_direct;
    /* Stacks go back and forth between two objects (a library and its
     * caller): the last two are tried before the search. */
    const struct cfi_object *o, *o2;
    struct cfi_walk_counters seen;
};

/* How a frame's step ended. */
enum { STEP_CFA, STEP_NEXT, STEP_END, STEP_STOP };

/* The object holding at, the last two tried first. */
static inline __attribute__((always_inline)) PPROF_SIGNAL_SAFE void
object_at(const struct walk_args *w, struct walk_step *s, uintptr_t at)
{
    if (!s->o || at < s->o->lo || at >= s->o->hi) {
        const struct cfi_object *t = s->o;
        if (s->o2 && at >= s->o2->lo && at < s->o2->hi)
            s->o = s->o2;
        else
            s->o = w->set ? find_object(w->set, at) : NULL;
        s->o2 = t;
    }
}

/* The rule row for at: the object's (its rule also put in the rule cache)
 * or, for code without a table, one worked out into *found; NULL when
 * there is none. */
static inline __attribute__((always_inline)) PPROF_SIGNAL_SAFE
    const struct cfi_row *
    row_at(struct walk_step *s, uintptr_t at, struct cfi_row *found)
{
    const struct cfi_row *row =
        s->o ? find_row(s->o, at, &s->seen.cache_misses) : NULL;
    if (!s->o) {
        s->seen.no_table++;
        if (rule_of_new_code(at, found) == 0)
            row = found;
    } else if (row && s->rules) {
        uint64_t e = rule_entry(row, at);
        if (e)
            __atomic_store_n(&s->rules[at & (CFI_RULES - 1)], e,
                             __ATOMIC_RELAXED);
    }
    return row;
}

/* 1 when the frame pointer is unknown and the rule needs it (or there is
 * no rule): a frame record must be found on the stack first. */
static inline __attribute__((always_inline)) PPROF_SIGNAL_SAFE int
needs_record(const struct walk_args *w, const struct cfi_row *row, int kind)
{
    return w->scan && !w->fp_ok &&
           (kind == CFI_CFA_UNKNOWN || kind == CFI_CFA_FP ||
            kind == CFI_CFA_DEREF_FP ||
            (kind != CFI_CFA_END && kind != CFI_CFA_SIGNAL &&
             row->fp == CFI_FP_AT_FP));
}

/* A frame whose return address is in a register: the ucontext has it. The
 * stack pointer need not grow (the CFA may be sp itself); a ucontext comes
 * only at the start or after a signal frame, whose stack pointer did. */
static inline __attribute__((always_inline)) STACK_READER PPROF_SIGNAL_SAFE int
step_ra_in_register(struct walk_args *w, const struct walk_step *s,
                    const struct cfi_row *row, uintptr_t sp)
{
    uintptr_t ra;
    long off = s->uc_n == w->n ? cfi_arch_uc_reg((unsigned)row->fp_off) : -1;
    if (off < 0)
        return STEP_STOP;
    if (s->uc_direct)
        ra = *(const uintptr_t *)(s->uc + (uintptr_t)off);
    else if (!peek(w->b, s->uc + (uintptr_t)off, &ra))
        return STEP_STOP;
    uintptr_t cfa = sp + (intptr_t)row->cfa_off;
    if (cfa < sp)
        return STEP_STOP;
    if (ra == 0)
        return STEP_END;
    w->r.pc = ra;
    w->r.sp = cfa;
    return STEP_NEXT;
}

/* The frame's CFA into *cfa (STEP_CFA), or the frame stepped some other
 * way (a signal frame, a return address in a register, frame pointers:
 * STEP_NEXT), or the walk's end (STEP_END, STEP_STOP). */
static inline __attribute__((always_inline)) STACK_READER PPROF_SIGNAL_SAFE int
frame_cfa(struct walk_args *w, struct walk_step *s, const struct cfi_row *row,
          int kind, uintptr_t at, uintptr_t sp, uintptr_t fp, uintptr_t *cfa)
{
    const struct bounds *b = w->b;
    if (likely(kind == CFI_CFA_SP)) {
        *cfa = sp + (intptr_t)row->cfa_off;
        return STEP_CFA;
    }
    if (kind == CFI_CFA_FP && w->fp_ok) {
        *cfa = fp + (intptr_t)row->cfa_off;
        return STEP_CFA;
    }
    switch (kind) {
    case CFI_CFA_END:
        return STEP_END;
    case CFI_CFA_SIGNAL:
        s->uc = sp; /* the ucontext, on the stack: read through peek */
        if (!from_signal_frame(b, &w->r))
            return STEP_STOP;
        w->exact = 1;
        w->fp_ok = 1;
        s->uc_n = w->n + 1;
        s->uc_direct = 0;
        return STEP_NEXT;
    case CFI_CFA_SP_RA_REG:
        return step_ra_in_register(w, s, row, sp);
    case CFI_CFA_UNKNOWN:
        s->seen.fp_frames++;
        if (!by_frame_pointer(b, &w->r, w->fp_ok) || w->r.sp <= sp)
            return STEP_STOP;
        return w->r.pc == 0 ? STEP_END : STEP_NEXT;
    case CFI_CFA_SP: *cfa = sp + (intptr_t)row->cfa_off; return STEP_CFA;
    case CFI_CFA_FP:
        if (!w->fp_ok)
            return STEP_STOP;
        *cfa = fp + (intptr_t)row->cfa_off;
        return STEP_CFA;
    case CFI_CFA_DEREF_SP:
        return peek(b, sp + (intptr_t)row->cfa_off, cfa) ? STEP_CFA
                                                          : STEP_STOP;
    case CFI_CFA_DEREF_FP:
        return w->fp_ok && peek(b, fp + (intptr_t)row->cfa_off, cfa)
                   ? STEP_CFA
                   : STEP_STOP;
    case CFI_CFA_PLT:
        *cfa = sp + 8 + ((at & 15) >= (uintptr_t)row->cfa_off ? 8 : 0);
        return STEP_CFA;
    default:
        return STEP_STOP;
    }
}

/* The caller's frame pointer into *fp (unchanged when the rule keeps it);
 * 0 when a slot the rule names cannot be read. A save slot below the stack
 * pointer was popped in an epilogue the frame is still in (GCC does not
 * describe the pop as a restore): the register holds that value again.
 * libunwind reads the slot, which the kernel's red zone keeps intact;
 * reading below the stack pointer is not allowed here. */
static inline __attribute__((always_inline)) STACK_READER PPROF_SIGNAL_SAFE int
caller_fp(struct walk_args *w, const struct cfi_row *row, uintptr_t cfa,
          uintptr_t sp, uintptr_t *fp)
{
    if (row->fp == CFI_FP_SAME)
        return 1;
    if (likely(row->fp == CFI_FP_AT_CFA) && cfa + row->fp_off >= sp) {
        if (!peek(w->b, cfa + row->fp_off, fp))
            return 0;
        w->fp_ok = 1;
        return 1;
    }
    switch (row->fp) {
    case CFI_FP_AT_CFA:
        return 1; /* the slot is below the stack pointer (read above) */
    case CFI_FP_AT_SP:
        if (sp + row->fp_off < sp)
            return 1;
        if (!peek(w->b, sp + row->fp_off, fp))
            return 0;
        w->fp_ok = 1;
        return 1;
    case CFI_FP_AT_FP:
        return w->fp_ok && peek(w->b, *fp + row->fp_off, fp);
    default:
        w->fp_ok = 0;
        return 1;
    }
}

/* One frame through its table row: its address written, the caller's
 * registers in w->r (STEP_NEXT), or the walk's end. */
static inline __attribute__((always_inline)) STACK_READER PPROF_SIGNAL_SAFE int
step_frame(struct walk_args *w, struct walk_step *s)
{
    s->seen.slow_frames++;
    /* A return address is the instruction after the call: its frame's
     * rules are those of the call, one byte before. */
    uintptr_t at = w->exact ? w->r.pc : w->r.pc - 1;
    w->pcs[w->n++] = w->sites ? at : w->r.pc;
    object_at(w, s, at);
    struct cfi_row found;
    const struct cfi_row *row = row_at(s, at, &found);
    uintptr_t sp = w->r.sp, cfa, ra, fp = w->r.fp;
    w->exact = 0;
    int kind = row ? row->cfa : CFI_CFA_UNKNOWN;
    if (needs_record(w, row, kind)) {
        if (!find_record(w->b, w->set, s->o, at, sp, &w->r.fp)) {
            s->seen.fp_lost++;
            return STEP_STOP;
        }
        fp = w->r.fp;
        w->fp_ok = 1;
        s->seen.fp_found++;
    }
    int how = frame_cfa(w, s, row, kind, at, sp, fp, &cfa);
    if (how != STEP_CFA)
        return how;
    if (cfa <= sp || !peek(w->b, cfa + CFI_RA_AT_CFA, &ra))
        return STEP_STOP;
    /* A zero return address ends a stack that has no table for its
     * outermost frame; in a trial it is more often a stale record's
     * chain running into a zeroed word (threads_blocked, 1 run in 36:
     * main -> a stale dlsym frame -> 0, taken over main's own record). */
    if (ra == 0)
        return w->trial ? STEP_STOP : STEP_END;
    if (!caller_fp(w, row, cfa, sp, &fp))
        return STEP_STOP;
    w->r.pc = ra;
    w->r.sp = cfa;
    w->r.fp = fp;
    return STEP_NEXT;
}

/* The general step, one frame each time round, which fills the rule cache
 * and hands back to rule_steps after each frame: frames the cache does not
 * step, from w->r, w->n addresses written already. w->fp_ok says whether
 * w->r.fp is known; w->scan allows find_record where it is not. The caller
 * is registered as a reader of w->set. Returns the number of addresses
 * written (w->n), w->full and w->clean set. */
static __attribute__((noinline)) STACK_READER PPROF_SIGNAL_SAFE int
general_walk(struct walk_args *w)
{
    const struct bounds *b = w->b;
    struct walk_step s = {0};
    w->r = *w->regs;
    s.top = b->lo + b->span + sizeof(uintptr_t);
    s.rules = w->set && s.top < RULE_ADDR_LIMIT ? w->set->rules : NULL;
    s.uc = (uintptr_t)w->r.uc;
    s.uc_n = s.uc ? 1 : 0;
    s.uc_direct = 1;
    for (;;) {
        if (s.rules && w->fp_ok && w->r.sp - b->lo <= s.top - b->lo &&
            rule_steps(s.rules, b->delta, s.top, &w->r, &w->exact, w->sites,
                       w->pcs, &w->n, w->max)) {
            w->clean = 1;
            break;
        }
        if (w->n == w->max) {
            w->full = 1;
            break;
        }
        int how = step_frame(w, &s);
        if (how == STEP_NEXT)
            continue;
        if (how == STEP_END)
            w->clean = 1;
        break;
    }
    /* Code with no table: the next capture outside locks refreshes the
     * tables, or, before their first build, counts what it cost
     * (cfi_tables_maybe_refresh). */
    if (s.seen.no_table)
        __atomic_store_n(&cfi_tables_stale, 1, __ATOMIC_RELAXED);
    counters_add(&s.seen);
    return w->n;
}

/* The walk, for every entry point (see struct walk_args for the parameters;
 * copy says the stack's bytes are a copy, at b->delta, else they are read
 * where they are): registered as a reader of the published set, frames
 * through the rule cache first, and through the general step only from
 * the first frame the cache does not step. */
static inline __attribute__((always_inline)) STACK_READER PPROF_SIGNAL_SAFE int
walk(const struct cfi_regs *regs, int exact, int fp_ok, int scan, int sites,
     int copy, int trial, const struct bounds *b, uintptr_t *pcs, int max,
     int *full, int *clean)
{
    struct cfi_regs r = *regs;
    int n = 0;
    *full = 0;
    *clean = 0;
    if (max <= 0)
        return 0;
    unsigned epoch = __atomic_load_n(&cfi_epoch, __ATOMIC_SEQ_CST);
    int *readers = &cfi_readers[epoch & 1];
    __atomic_fetch_add(readers, 1, __ATOMIC_SEQ_CST);
    const struct cfi_set *set = __atomic_load_n(&cfi_current, __ATOMIC_SEQ_CST);
    uintptr_t top = b->lo + b->span + sizeof(uintptr_t);
    if (set && top < RULE_ADDR_LIMIT && fp_ok && r.sp - b->lo <= top - b->lo &&
        rule_steps(set->rules, copy ? b->delta : 0, top, &r, &exact, sites,
                   pcs, &n, max))
        *clean = 1;
    else {
        struct walk_args w = {.regs = &r, .b = b, .set = set, .exact = exact,
                              .fp_ok = fp_ok, .scan = scan, .sites = sites,
                              .trial = trial, .pcs = pcs, .n = n, .max = max};
        n = general_walk(&w);
        *full = w.full;
        *clean = w.clean;
    }
    __atomic_fetch_sub(readers, 1, __ATOMIC_SEQ_CST);
    return n;
}

/* 1 when the stack walks from regs (frame pointer known) to its outermost
 * frame, or for the whole of a walk. */
static __attribute__((noinline)) STACK_READER PPROF_SIGNAL_SAFE int
trial_walk(const struct cfi_regs *regs, const struct bounds *b)
{
    uintptr_t pcs[THREADS_TRIAL_MAX];
    int full, clean;
    walk(regs, 0, 1, 0, 0, 1, 1, b, pcs, THREADS_TRIAL_MAX, &full, &clean);
    return full || clean;
}

STACK_READER PPROF_SIGNAL_SAFE int cfi_walk(const struct cfi_regs *regs, int exact,
                               uintptr_t stack_lo, uintptr_t stack_hi,
                               uintptr_t *pcs, int max, int *full)
{
    struct bounds b = make_bounds(stack_lo, stack_hi, 0);
    int clean;
    return walk(regs, exact, 1, 0, 0, 0, 0, &b, pcs, max, full, &clean);
}

STACK_READER PPROF_SIGNAL_SAFE int
cfi_walk_sites(const struct cfi_regs *regs, int exact, uintptr_t stack_lo,
               uintptr_t stack_hi, uintptr_t *pcs, int max, int *full)
{
    struct bounds b = make_bounds(stack_lo, stack_hi, 0);
    int clean;
    return walk(regs, exact, 1, 0, 1, 0, 0, &b, pcs, max, full, &clean);
}

STACK_READER PPROF_SIGNAL_SAFE int cfi_walk_copy(const struct cfi_regs *regs,
                                                 uintptr_t stack_lo,
                                                 uintptr_t stack_hi,
                                                 const void *copy,
                                                 uintptr_t *pcs, int max,
                                                 int *full)
{
    struct bounds b = make_bounds(stack_lo, stack_hi,
                                  (uintptr_t)copy - stack_lo);
    int clean;
    return walk(regs, 1, 0, 1, 0, 1, 0, &b, pcs, max, full, &clean);
}

STACK_READER PPROF_SIGNAL_SAFE int
cfi_walk_copy_sites(const struct cfi_regs *regs, uintptr_t stack_lo,
                    uintptr_t stack_hi, const void *copy, uintptr_t *pcs,
                    int max, int *full)
{
    struct bounds b = make_bounds(stack_lo, stack_hi,
                                  (uintptr_t)copy - stack_lo);
    int clean;
    return walk(regs, 0, 1, 0, 1, 1, 0, &b, pcs, max, full, &clean);
}

/* The registers of the caller of the function whose frame record is
 * record (saved frame pointer, return address) on the calling thread's
 * stack, and the stack's top; -1 when the thread's bounds are unknown
 * (counted) or the record is not on its stack. */
static inline PPROF_SIGNAL_SAFE int from_record(const uintptr_t *record,
                                                struct cfi_regs *r,
                                                uintptr_t *hi)
{
    uintptr_t lo, at = (uintptr_t)record;
    if (cfi_stack_bounds(&lo, hi) != 0) {
        __atomic_fetch_add(&cfi_walk_counters.no_bounds, 1, __ATOMIC_RELAXED);
        return -1;
    }
    if (at < lo || at + 2 * sizeof(uintptr_t) > *hi)
        return -1;
    *r = (struct cfi_regs){record[1], at + 2 * sizeof(uintptr_t), record[0],
                           NULL};
    return 0;
}

STACK_READER PPROF_SIGNAL_SAFE int cfi_walk_frame(const void *frame,
                                                  uintptr_t *pcs, int max,
                                                  int *full)
{
    struct cfi_regs r;
    uintptr_t hi;
    *full = 0;
    if (from_record(frame, &r, &hi) != 0)
        return 0;
    return cfi_walk_sites(&r, 0, r.sp, hi, pcs, max, full);
}

__attribute__((noinline)) STACK_READER PPROF_SIGNAL_SAFE int
cfi_walk_here(uintptr_t *pcs, int max, int *full)
{
    /* This function keeps a frame pointer (the agent is built with
     * them): the caller's registers are one frame up. */
    struct cfi_regs r;
    uintptr_t hi;
    *full = 0;
    if (from_record(__builtin_frame_address(0), &r, &hi) != 0)
        return 0;
    int n = cfi_walk(&r, 0, r.sp, hi, pcs, max, full);
    __asm__ volatile("" ::: "memory"); /* keep the frame: no tail call */
    return n;
}
