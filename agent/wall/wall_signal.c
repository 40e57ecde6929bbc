/*
 * The wall profile's timer handler, and nothing else (plus the reader's
 * side of its slot, which never runs in a handler).
 *
 * Context: signal context on a host thread whose CPU-time timer expired
 * (wall_timer.c): the thread was running. It interrupts any instruction,
 * possibly the CPU profiler's handler or an interposer. The same rules as
 * cpu_signal.c: only async-signal-safe calls, no lock, no allocation, errno
 * left as found. The walk is the table-driven one (agent/stacks/stack_signal.c),
 * which takes no lock, makes no system call and never calls into the
 * loader.
 *
 * The stack goes to the thread's own slot under a sequence count (see
 * struct wall_slot in wall.h): only this thread's handler writes it, and
 * the handler cannot nest in itself (its signal is blocked while it runs).
 */
#include "agent/wall/wall.h"
#include "agent/core/real.h"

#include "agent/compiler.h"
#include "agent/guard.h"
#include "agent/core/labels.h"
#include "agent/host/signals.h"
#include "agent/stacks/stack.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

struct wall_slot *wall_slots;
struct wall_counters wall_counters;

static PPROF_SIGNAL_SAFE void wall_signal_take(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    int saved_errno = errno;
    uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    struct wall_slot *slots = __atomic_load_n(&wall_slots, __ATOMIC_ACQUIRE);
    uint32_t idx = (uint32_t)(v >> 32) & 0xffff;
    /* Only our timers' expiries come here (the host's went on to its
     * handler: signals.h), and only into the slot that is still this
     * thread's. */
    if (!slots || idx >= WALL_THREADS_MAX || agent_tls.agent_thread) {
        errno = saved_errno;
        return;
    }
    struct wall_slot *s = &slots[idx];
    if (__atomic_load_n(&s->tid, __ATOMIC_ACQUIRE) != (uint32_t)v) {
        __atomic_fetch_add(&wall_counters.foreign, 1, __ATOMIC_RELAXED);
        errno = saved_errno;
        return;
    }
    ucontext_t *uc = ucv;
    uintptr_t pcs[WALL_STACK_MAX];
    uint32_t depth = stack_unwind_signal(uc, pcs, WALL_STACK_MAX);
    if (depth == 0) {
        /* Stack bounds unknown (a thread the agent did not see start):
         * the interrupted instruction only. */
        pcs[0] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        depth = 1;
    }
    /* How many times it has slept so far: a stack taken before its last
     * sleep is not what it does after it (wall_look.c). */
    struct rusage ru;
    uint64_t nvcsw = real_syscall(SYS_getrusage, RUSAGE_THREAD, &ru) == 0
                         ? (uint64_t)ru.ru_nvcsw
                         : ~0ULL;
    uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    for (uint32_t i = 0; i < depth; i++)
        __atomic_store_n(&s->pcs[i], pcs[i], __ATOMIC_RELAXED);
    __atomic_store_n(&s->depth, depth, __ATOMIC_RELAXED);
    __atomic_store_n(&s->labels, labels_current_id(), __ATOMIC_RELAXED);
    __atomic_store_n(&s->nvcsw, nvcsw, __ATOMIC_RELAXED);
    __atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
    __atomic_fetch_add(&wall_counters.taken, 1, __ATOMIC_RELAXED);
    errno = saved_errno;
}

PPROF_SIGNAL_SAFE void wall_signal_handler(int sig, siginfo_t *si, void *ucv)
{
    /* A kill, a sigqueue or a timer of the host's on this signal: to the
     * handler the agent chained in front of, if any. */
    signals_dispatch(SIGNALS_WALL, wall_signal_take, sig, si, ucv);
}

uint32_t wall_slot_read(const struct wall_slot *s, uint32_t after,
                        uintptr_t *pcs, int *depth, uint64_t *nvcsw)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        uint32_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
        if (seq <= after || seq == 0)
            return 0;
        if (seq & 1)
            continue; /* being written: the handler is short */
        uint32_t d = __atomic_load_n(&s->depth, __ATOMIC_RELAXED);
        if (d > WALL_STACK_MAX)
            d = WALL_STACK_MAX;
        for (uint32_t i = 0; i < d; i++)
            pcs[i] = __atomic_load_n(&s->pcs[i], __ATOMIC_RELAXED);
        uint64_t nv = __atomic_load_n(&s->nvcsw, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) != seq)
            continue;
        *depth = (int)d;
        *nvcsw = nv;
        return seq;
    }
    return 0;
}
