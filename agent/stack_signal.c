/*
 * Stack capture in signal context: the CPU sampler's handler and the
 * threads profile's handler unwind the interrupted context here. Entered
 * only from those handlers, which have already made libunwind safe to run
 * (the program-header cache of agent/phdr_cache.c, the dlclose fence): this
 * file calls nothing but libunwind's local unwinder and never allocates.
 *
 * libunwind itself takes a process-wide lock around its cache, with every
 * signal blocked while it holds it (so a handler never interrupts its own
 * thread's holder). Across fork that lock is what the gate of
 * agent/stack_fork.c protects: while a fork is being prepared this returns
 * 0 without entering libunwind.
 */
#include "agent/agent.h"
#include "agent/symbols.h"

#include <ucontext.h>

#include "agent/unwinder.h"

PPROF_SIGNAL_SAFE
uint32_t stack_unwind_signal(void *ucontext, uintptr_t *pcs, uint32_t max)
{
    unw_cursor_t cursor;
    if (max == 0 || !unwinder.step || !stack_unwind_enter())
        return 0;
    uint32_t n = 0;
    if (unwinder.init_local2(&cursor, (unw_context_t *)ucontext,
                             UNW_INIT_SIGNAL_FRAME) != 0) {
        stack_unwind_leave();
        return 0;
    }
    for (;;) {
        unw_word_t ip;
        if (unwinder.get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0)
            break;
        if (n == max) {
            pcs[n - 1] = FRAME_TRUNCATED;
            break;
        }
        /* The leaf is the interrupted instruction itself; every caller is
         * a return address, turned into its call site. */
        pcs[n] = n == 0 ? (uintptr_t)ip : (uintptr_t)ip - 1;
        n++;
        if (unwinder.step(&cursor) <= 0)
            break;
    }
    stack_unwind_leave();
    return n;
}
