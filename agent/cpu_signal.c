/*
 * The CPU profiling signal handler, and nothing else.
 *
 * Context: signal context on any host thread, interrupting any instruction
 * (malloc, the dynamic loader, libunwind, the agent's own hooks). It must
 * only make async-signal-safe calls, take no lock of its own, never wait
 * for anything the interrupted thread may hold, never allocate, and leave
 * errno as it found it.
 *
 * How it stays safe:
 * - libunwind 1.6's local unwinder calls dl_iterate_phdr, which takes the
 *   loader lock; with cpu_in_handler set, phdr_hooks.c answers it from a
 *   cached snapshot instead (phdr_cache.c).
 * - libunwind takes one lock of its own, around its register-state cache,
 *   with every signal blocked (so never on a thread this handler
 *   interrupted). Debian's build has no per-thread cache: the policy asked
 *   for in cpu_signal_init falls back to that global one. Normal-context
 *   captures (stack.c) can hold it while they call the real
 *   dl_iterate_phdr, which waits for the loader lock; so a thread
 *   interrupted inside the real dl_iterate_phdr (agent_tls.in_loader) is
 *   never unwound here, only its PC kept: otherwise it would wait for that
 *   capture, which waits for it. Across fork, see stack_fork.c.
 * - A library being unloaded could vanish under the unwinder: the handler
 *   registers in cpu_phdr_readers and, while dlclose has cpu_phdr_busy
 *   raised, keeps only the interrupted PC (Dekker-style, seq_cst on both
 *   sides; counted as shallow samples).
 * - A thread interrupted inside the agent (guard active: possibly inside
 *   libunwind for a heap sample) is never unwound again: the sample keeps
 *   only the interrupted PC, which names the agent's function.
 * - Samples go to a preallocated lock-free buffer; when it is full the
 *   sample's weight is added to the lost counter, which the profile shows.
 */
#include "agent/cpu.h"

#include "agent/agent.h"
#include "agent/labels.h"
#include "agent/symbols.h"

#include <errno.h>
#include <time.h>
#include <ucontext.h>

#include "agent/unwinder.h"

struct cpu_counters cpu_counters;
__thread int cpu_in_handler __attribute__((tls_model("initial-exec")));

void cpu_signal_init(void)
{
    if (!unwinder.step)
        return; /* libunwind could not be loaded (stack_init tried) */
    unwinder.set_caching_policy(*unwinder.local_addr_space,
                                UNW_CACHE_PER_THREAD);
    /* One full unwind outside any handler, so libunwind's lazy
     * initialization (locks, memory pools) never happens inside one. */
    unw_context_t ctx;
    unw_cursor_t cursor;
    unwinder.getcontext(&ctx);
    if (unwinder.init_local(&cursor, &ctx) == 0) {
        for (int i = 0; i < 64 && unwinder.step(&cursor) > 0; i++)
            ;
    }
}

static PPROF_SIGNAL_SAFE uint32_t unwind(ucontext_t *uc, uintptr_t *pcs)
{
    return stack_unwind_signal(uc, pcs, CPU_STACK_MAX);
}

static inline uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO, async-signal-safe */
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

PPROF_SIGNAL_SAFE void cpu_signal_handler(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    int saved_errno = errno;
    /* Only our timers' expiries count: anything else on this signal (a
     * stray kill, a setitimer the host armed) is ignored. */
    if (si->si_code != SI_TIMER ||
        ((uint64_t)(uintptr_t)si->si_value.sival_ptr >> 32) !=
            CPU_TIMER_COOKIE ||
        agent_tls.agent_thread ||
        !__atomic_load_n(&cpu_active, __ATOMIC_RELAXED)) {
        errno = saved_errno;
        return;
    }
    uint64_t t0 = mono_ns();
    uint32_t weight = 1 + (uint32_t)(si->si_overrun > 0 ? si->si_overrun : 0);
    uint32_t tid = (uint32_t)(uintptr_t)si->si_value.sival_ptr;
    ucontext_t *uc = ucv;

    __atomic_fetch_add(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    int unloading = __atomic_load_n(&cpu_phdr_busy, __ATOMIC_SEQ_CST) != 0;
    struct cpu_sample *s = cpu_ringbuf_claim();
    if (!s) {
        __atomic_fetch_add(&cpu_counters.lost, weight, __ATOMIC_RELAXED);
        goto out;
    }
    s->tid = tid;
    s->weight = weight;
    s->labels = labels_current_id(); /* this thread's own TLS: a plain read */
    int entered = 0;
    if (guard_active() || unloading || agent_tls.in_loader) {
        /* Inside the agent (maybe inside libunwind), holding the loader
         * lock, or a library is being unloaded and the unwinder could walk
         * into it: the PC only, which keeps the CPU time and its function,
         * without the callers. */
        s->pcs[0] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        s->depth = 1;
        if (unloading)
            __atomic_fetch_add(&cpu_counters.shallow, weight,
                               __ATOMIC_RELAXED);
    } else {
        guard_enter();
        entered = 1;
        cpu_in_handler = 1;
        s->depth = unwind(uc, s->pcs);
        cpu_in_handler = 0;
        if (s->depth == 0) {
            s->pcs[0] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
            s->depth = 1;
        }
    }
    cpu_ringbuf_commit(s);
    __atomic_fetch_add(&cpu_counters.handled, 1, __ATOMIC_RELAXED);
    uint64_t dt = mono_ns() - t0;
    __atomic_fetch_add(&cpu_counters.handler_ns, dt, __ATOMIC_RELAXED);
    uint64_t b = dt / CPU_HIST_STEP_NS;
    __atomic_fetch_add(&cpu_counters.hist[b < CPU_HIST_BUCKETS ? b
                                                               : CPU_HIST_BUCKETS - 1],
                       1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    errno = saved_errno;
    /* Last, with everything of the sample settled: putting back the host's
     * cancellation state acts on a cancel that came meanwhile when the
     * thread is in asynchronous mode (its own, or the C library's inside a
     * cancellable system call), as the cancel signal would have here. */
    if (entered)
        guard_leave();
    return;
out:
    __atomic_fetch_sub(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    errno = saved_errno;
}
