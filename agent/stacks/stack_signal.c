/*
 * Stack capture in signal context: the CPU sampler's handler and the
 * threads profile's handler walk the interrupted context here, with the
 * unwind tables of agent/stacks/cfi_tables.c (agent/stacks/cfi_walk.c): no lock, no
 * allocation, no system call, no call into the loader, so nothing the
 * interrupted thread can hold (the loader lock, an allocator lock, a walk
 * of its own) matters. The walk starts from the signal's ucontext: the
 * leaf is the interrupted instruction itself.
 */
#include "agent/stacks/cfi.h"
#include "agent/compiler.h"
#include "agent/stacks/stack.h"

#include <ucontext.h>

/*
 * Drops the frames of an agent signal handler that this signal
 * interrupted, and its signal frame: the CPU profile's and the wall
 * profile's timers both run on the thread's CPU clock and often expire at
 * the same scheduler tick, and the kernel then sets up the second signal's
 * handler before the first one's first instruction. The sample belongs to
 * the host code under the first handler (the time before the tick was
 * the host's), whose stack the walk went on to through the signal frame.
 * The first frames are the agent's and the trampoline's return site, in
 * that order, or nothing is dropped (an interrupted malloc hook, say).
 */
static PPROF_SIGNAL_SAFE int skip_own_handler(uintptr_t *pcs, int n)
{
    uintptr_t tramp = __atomic_load_n(&stack_sigreturn_at, __ATOMIC_RELAXED);
    if (!tramp || n < 3 || !stack_is_self(pcs[0]))
        return n;
    for (int k = 1; k < n; k++) {
        if (pcs[k] + 1 == tramp) {
            for (int i = k + 1; i < n; i++)
                pcs[i - k - 1] = pcs[i];
            return n - k - 1;
        }
        if (!stack_is_self(pcs[k]))
            break;
    }
    return n;
}

__thread const void *stack_signal_outer __attribute__((tls_model("initial-exec")));

/*
 * The context an agent handler interrupted, when this signal interrupted
 * that handler on a stack whose bounds are unknown (no walk reaches the
 * host's frames there): the one the handler published (stack_signal_outer),
 * or, at the handler's first instruction (both timers expired at the same
 * tick, and the kernel set up this signal's frame before the first
 * handler ran), the signal frame right above: the return address is the
 * trampoline and the frame's ucontext follows it (x86-64's rt_sigframe).
 * Reads the word at the interrupted stack pointer, which the thread was
 * running with. NULL otherwise.
 */
static PPROF_SIGNAL_SAFE const ucontext_t *outer_context(const ucontext_t *uc,
                                                         uintptr_t pc,
                                                         uintptr_t sp)
{
    if (!stack_is_self(pc))
        return NULL;
    const ucontext_t *o = stack_signal_outer;
    if (o && o != uc)
        return o;
#if defined(__x86_64__)
    uintptr_t tramp = __atomic_load_n(&stack_sigreturn_at, __ATOMIC_RELAXED);
    if (tramp && sp && !(sp & 7) && *(const uintptr_t *)sp == tramp)
        return (const ucontext_t *)(sp + sizeof(uintptr_t));
#endif
    return NULL;
}

/*
 * The top of the goroutine stack that sp lies on, when the thread runs Go
 * code (stack_go_g_at, go_stack.c): Go's g for the thread holds the
 * bounds of the stack it runs on in its first two words (g.stack.lo,
 * g.stack.hi). The word is 0 on threads Go did not make, and a g is never
 * freed, so the read is safe; bounds that do not hold sp (a switch of
 * stacks under way, a g0 or signal g) are not used. -1 when there are
 * none. The walk above sp stays inside that stack, which the goroutine is
 * running on, so mapped.
 */
static PPROF_SIGNAL_SAFE int go_stack_top(uintptr_t sp, uintptr_t *hi)
{
#if defined(__x86_64__)
    intptr_t at = __atomic_load_n(&stack_go_g_at, __ATOMIC_RELAXED);
    if (!at)
        return -1;
    uintptr_t g;
    __asm__ volatile("movq %%fs:(%1), %0" : "=r"(g) : "r"(at));
    if (!g || (g & 7))
        return -1;
    uintptr_t lo = ((const volatile uintptr_t *)g)[0];
    uintptr_t top = ((const volatile uintptr_t *)g)[1];
    if (lo >= top || sp < lo || sp >= top || top - lo > (1UL << 30))
        return -1;
    *hi = top;
    return 0;
#else
    (void)sp;
    (void)hi;
    return -1;
#endif
}

/* A thread the agent did not see start: [sp, its control block) when one
 * writable mapping of the snapshot (stack.c) holds both, as a stack of
 * the C library's threads does. 0, or -1 (its leaf alone is taken). */
static PPROF_SIGNAL_SAFE int foreign_bounds(uintptr_t sp, uintptr_t *lo,
                                            uintptr_t *hi)
{
#if defined(__x86_64__)
    int n = __atomic_load_n(&stack_foreign_n, __ATOMIC_ACQUIRE);
    uintptr_t tcb = (uintptr_t)__builtin_thread_pointer();
    int a = 0, b = n;
    while (a < b) { /* the last range starting at or below sp */
        int m = (a + b) / 2;
        if (stack_foreign[m].lo <= sp)
            a = m + 1;
        else
            b = m;
    }
    if (a == 0)
        return -1;
    const struct stack_range *r = &stack_foreign[a - 1];
    if (sp >= r->hi || tcb <= sp || tcb > r->hi)
        return -1;
    *lo = sp;
    *hi = tcb;
    return 0;
#else
    (void)sp;
    (void)lo;
    (void)hi;
    return -1;
#endif
}

PPROF_SIGNAL_SAFE
uint32_t stack_unwind_signal(void *ucontext, uintptr_t *pcs, uint32_t max)
{
    const ucontext_t *uc = ucontext;
    uintptr_t lo, hi;
    if (max == 0)
        return 0;
    if (cfi_stack_bounds(&lo, &hi) != 0 &&
        foreign_bounds((uintptr_t)uc->uc_mcontext.gregs[REG_RSP], &lo, &hi) != 0)
        return 0;
    struct cfi_regs r = {(uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
                         (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
                         (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], uc};
    /* Interrupted on another stack (a handler of the host's on its
     * alternate stack, code that moved its stack pointer into memory of its
     * own as Erlang's JIT does): only the leaf is known to be right, and
     * inside an agent handler the leaf is the host's under it. */
    /* Go code, on a goroutine's stack: walked there (frame pointers; Go
     * keeps them on x86-64). */
    if ((r.sp < lo || r.sp >= hi) && !stack_is_self(r.pc) &&
        go_stack_top(r.sp, &hi) == 0)
        lo = r.sp;
    if (r.sp < lo || r.sp >= hi) {
        const ucontext_t *o = outer_context(uc, r.pc, r.sp);
        pcs[0] = o ? (uintptr_t)o->uc_mcontext.gregs[REG_RIP] : r.pc;
        return 1;
    }
    int full;
    /* Every caller as its call site (return address - 1). */
    int n = cfi_walk_sites(&r, 1, r.sp, hi, pcs, (int)max, &full);
    if (full)
        pcs[n - 1] = FRAME_TRUNCATED;
    return (uint32_t)skip_own_handler(pcs, n);
}
