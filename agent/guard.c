/*
 * The per-thread reentrancy state and the spinlock used by the agent's own
 * tables. Both are tiny and shared by every other file of the agent.
 *
 * The thread-local lives in initial-exec TLS so that touching it never calls
 * __tls_get_addr, which may allocate: interposed malloc and signal handlers
 * read it first thing.
 */
#include "agent/agent.h"

#include <sched.h>

__thread struct agent_tls agent_tls __attribute__((tls_model("initial-exec")));

volatile int agent_ready;

void spin_lock(spinlock_t *l)
{
    for (int spins = 0;; spins++) {
        if (!__atomic_exchange_n(&l->locked, 1, __ATOMIC_ACQUIRE))
            return;
        while (__atomic_load_n(&l->locked, __ATOMIC_RELAXED)) {
            if (++spins > 100)
                sched_yield();
            else
                __builtin_ia32_pause();
        }
    }
}
