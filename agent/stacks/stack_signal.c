/*
 * Stack capture in signal context: the CPU sampler's handler and the
 * threads profile's handler walk the interrupted context here, with the
 * unwind tables of agent/stacks/cfi_tables.c (agent/stacks/cfi_walk.c): no lock, no
 * allocation, no system call, no call into the loader, so nothing the
 * interrupted thread can hold (the loader lock, an allocator lock, a walk
 * of its own) matters. The walk starts from the signal's ucontext: the
 * leaf is the interrupted instruction itself.
 */
#include "agent/agent.h"
#include "agent/cfi.h"

#include <ucontext.h>

PPROF_SIGNAL_SAFE
uint32_t stack_unwind_signal(void *ucontext, uintptr_t *pcs, uint32_t max)
{
    const ucontext_t *uc = ucontext;
    uintptr_t lo, hi;
    if (max == 0 || cfi_stack_bounds(&lo, &hi) != 0)
        return 0;
    struct cfi_regs r = {(uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
                         (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
                         (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], uc};
    /* Interrupted on another stack (a handler of the host's on its
     * alternate stack): only the leaf is known to be right. */
    if (r.sp < lo || r.sp >= hi) {
        pcs[0] = r.pc;
        return 1;
    }
    int full;
    /* Every caller as its call site (return address - 1). */
    int n = cfi_walk_sites(&r, 1, r.sp, hi, pcs, (int)max, &full);
    if (full)
        pcs[n - 1] = FRAME_TRUNCATED;
    return (uint32_t)n;
}
