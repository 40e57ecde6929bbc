/*
 * libunwind across fork. libunwind keeps process-wide locks: around its
 * register-state cache (Debian's build has no per-thread cache and turns
 * UNW_CACHE_PER_THREAD into the global one) and its memory pools. If one
 * thread forks while another is inside libunwind (a CPU sample, a sampled
 * lock or pthread_create), the child inherits that lock held by a thread it
 * does not have, and its first unwind waits forever.
 *
 * So every entry into libunwind goes through a gate (stack_unwind_enter()
 * in agent.h): a count of threads inside, and a flag that the fork-prepare
 * handler raises before it waits for the count to drop to the forking
 * thread's own. A caller that finds the gate closed does not unwind at all:
 * it keeps what it has without libunwind (the interrupted PC in a signal
 * handler, an unknown stack elsewhere). It never waits, because a thread
 * waiting at the gate may hold a lock that another library's prepare
 * handler, running after this one, needs.
 *
 * Registered last of the agent's fork handlers, so its prepare runs first:
 * the heap table's prepare takes its shard locks only after the gate has
 * drained. The other way round, a capture waiting for the loader lock
 * could wait for a dlclose that frees a sampled block, whose free waits
 * for a shard lock the forking thread holds while it waits for the
 * capture. Captures that find the gate closed return at once, so the heap
 * sampler's own gate drains quickly after this one.
 */
#include "agent/agent.h"
#include "agent/cfi.h"
#include "agent/cpu.h"

#include <pthread.h>
#include <sched.h>

int stack_unwinders;
int stack_unwind_closed;

static void fork_prepare(void)
{
    __atomic_store_n(&stack_unwind_closed, 1, __ATOMIC_SEQ_CST);
    /* A fork from a signal handler that interrupted this very thread's
     * unwind must not wait for itself. */
    while (__atomic_load_n(&stack_unwinders, __ATOMIC_SEQ_CST) >
           agent_tls.unwinding)
        sched_yield();
}

static void fork_parent(void)
{
    __atomic_store_n(&stack_unwind_closed, 0, __ATOMIC_SEQ_CST);
}

static void fork_child(void)
{
    /* Only the forking thread came along. */
    __atomic_store_n(&stack_unwinders, agent_tls.unwinding, __ATOMIC_SEQ_CST);
    __atomic_store_n(&stack_unwind_closed, 0, __ATOMIC_SEQ_CST);
    phdr_cache_fork_child();
    cfi_tables_fork_child();
}

void stack_fork_init(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}
