/*
 * The threads profile's signal handler, and nothing else.
 *
 * Context: signal context on a host thread that the HTTP worker asked for
 * its stack (agent/threads/threads.c), interrupting any instruction, possibly the
 * CPU profiler's own handler or an interposer. The same rules as
 * cpu_signal.c: only async-signal-safe calls, no lock normal code can hold,
 * no allocation, errno left as found.
 *
 * Safety, as in the CPU sampler: the walk uses the unwind tables
 * (agent/stacks/stack_signal.c), which take no lock, make no system call and
 * never call into the loader, so the thread is walked wherever it was
 * interrupted. The answer goes to a slot the worker preallocated and only
 * if the slot's generation still says "asked" (a CAS), so a late or stray
 * signal writes nothing.
 */
#include "agent/threads/threads.h"

#include "agent/compiler.h"
#include "agent/cpu/cpu.h"
#include "agent/guard.h"
#include "agent/core/labels.h"
#include "agent/host/signals.h"
#include "agent/stacks/stack.h"

#include <errno.h>
#include <ucontext.h>
#include <unistd.h>

struct thread_slot *threads_slots;
uint32_t threads_nslots;

static PPROF_SIGNAL_SAFE uint32_t unwind(ucontext_t *uc, uintptr_t *pcs)
{
    return stack_unwind_signal(uc, pcs, THREADS_STACK_MAX);
}

static PPROF_SIGNAL_SAFE void threads_signal_take(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    int saved_errno = errno;
    uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    if (agent_tls.agent_thread) {
        errno = saved_errno;
        return;
    }
    uint32_t gen = (uint32_t)(v >> 32) & 0xffff;
    uint32_t idx = (uint32_t)v;
    struct thread_slot *slots = __atomic_load_n(&threads_slots,
                                                __ATOMIC_ACQUIRE);
    if (!slots || idx >= __atomic_load_n(&threads_nslots, __ATOMIC_ACQUIRE)) {
        errno = saved_errno;
        return;
    }
    struct thread_slot *s = &slots[idx];
    uint64_t expected = ((uint64_t)gen << 2) | SLOT_ASKED;
    if (!__atomic_compare_exchange_n(&s->word, &expected,
                                     ((uint64_t)gen << 2) | SLOT_WRITING, 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        errno = saved_errno;
        return;
    }
    ucontext_t *uc = ucv;
    s->labels = labels_current_id();
    uint32_t depth = unwind(uc, s->pcs);
    if (depth == 0) {
        s->pcs[0] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        depth = 1;
    }
    s->depth = depth;
    __atomic_store_n(&s->word, ((uint64_t)gen << 2) | SLOT_DONE,
                     __ATOMIC_RELEASE);
    errno = saved_errno;
}

PPROF_SIGNAL_SAFE void threads_signal_handler(int sig, siginfo_t *si, void *ucv)
{
    /* Not a question of the worker's: the host's, to the handler the
     * agent chained in front of, if any. */
    signals_dispatch(SIGNALS_THREADS, threads_signal_take, sig, si, ucv);
}
