/*
 * The threads profile's signal handler, and nothing else.
 *
 * Context: signal context on a host thread that the HTTP worker asked for
 * its stack (agent/threads.c), interrupting any instruction, possibly the
 * CPU profiler's own handler or an interposer. The same rules as
 * cpu_signal.c: only async-signal-safe calls, no lock normal code can hold,
 * no allocation, errno left as found.
 *
 * Safety, borrowed from the CPU sampler:
 * - libunwind runs with cpu_in_handler set, so its dl_iterate_phdr calls
 *   are answered from phdr_cache.c's snapshot (refreshed by the worker
 *   before it sends any signal), never with the loader lock;
 * - while a library is being unloaded (cpu_phdr_busy), or the thread is
 *   inside the agent (guard active: maybe inside libunwind already) or
 *   inside the real dl_iterate_phdr (in_loader: see cpu_signal.c), only
 *   the interrupted PC is kept;
 * - the answer goes to a slot the worker preallocated and only if the
 *   slot's generation still says "asked" (a CAS), so a late or stray signal
 *   writes nothing.
 */
#include "agent/threads.h"

#include "agent/agent.h"
#include "agent/cpu.h"
#include "agent/labels.h"
#include "agent/symbols.h"

#include <errno.h>
#include <ucontext.h>
#include <unistd.h>


struct thread_slot *threads_slots;
uint32_t threads_nslots;

static PPROF_SIGNAL_SAFE uint32_t unwind(ucontext_t *uc, uintptr_t *pcs)
{
    return stack_unwind_signal(uc, pcs, THREADS_STACK_MAX);
}

PPROF_SIGNAL_SAFE void threads_signal_handler(int sig, siginfo_t *si,
                                              void *ucv)
{
    (void)sig;
    int saved_errno = errno;
    uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    if (si->si_code != SI_QUEUE || si->si_pid != getpid() ||
        (v >> 48) != THREADS_COOKIE || agent_tls.agent_thread) {
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
    __atomic_fetch_add(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    int unloading = __atomic_load_n(&cpu_phdr_busy, __ATOMIC_SEQ_CST) != 0;
    uint32_t depth = 0;
    int entered = 0;
    if (!guard_active() && !unloading && !agent_tls.in_loader) {
        guard_enter();
        entered = 1;
        int was_in_handler = cpu_in_handler;
        cpu_in_handler = 1;
        depth = unwind(uc, s->pcs);
        cpu_in_handler = was_in_handler;
    }
    __atomic_fetch_sub(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    if (depth == 0) {
        s->pcs[0] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        depth = 1;
    }
    s->depth = depth;
    __atomic_store_n(&s->word, ((uint64_t)gen << 2) | SLOT_DONE,
                     __ATOMIC_RELEASE);
    errno = saved_errno;
    /* Last: see cpu_signal.c (a cancel may act here in asynchronous mode,
     * with the answer already given). */
    if (entered)
        guard_leave();
}
