/*
 * The agent's calls into the loader, and the fork gate that keeps them
 * apart from the host's fork().
 *
 * glibc's fork() resets some of its locks in the child (malloc's arenas,
 * the stdio list, the loader's main lock) but not the loader's write lock,
 * which dl_iterate_phdr and dlopen take, nor the resolver's: a child forked
 * while one of the agent's threads held one inherits it held, and its
 * first dl_iterate_phdr waits for ever (a PostgreSQL backend forked while
 * a profile started). A single-threaded forking server has no such risk
 * without the agent, so the agent must not add it: each of its calls that
 * takes such a lock runs inside the gate, and the forking thread closes
 * the gate and waits for them to leave before the fork.
 * docs/fork.md lists the C library's locks the agent's threads take and
 * why none reaches a child held.
 *
 * Entered on the agent's threads and on host threads running the agent's
 * code (never from a signal handler). The gate's state: inside (calls in
 * the gate, all threads), closed (forks being prepared), waiting (calls
 * kept out by a fork, which the next fork lets in first), depth (this
 * thread's nesting, in agent_tls); all atomics, no lock.
 */
#include "agent/core/loader.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/guard.h"
#include "agent/core/next_symbol.h"

#include <time.h>

int (*real_dl_iterate_phdr)(int (*)(struct dl_phdr_info *, size_t, void *),
                            void *);

static int inside FORK_STATE;
static int closed FORK_STATE;
/* Agent calls waiting at a closed gate: the next fork lets them in first,
 * or a thread forking in a loop would keep them out for ever. */
static int waiting FORK_STATE;
/* Prepare steps that gave up waiting (an agent call that never left). */
static unsigned long gave_up;

/* How long a fork waits for the agent's calls to leave the gate. */
#define GATE_WAIT_NS 2000000000L
#define GATE_NAP_NS 50000L

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    real_nanosleep(&ts, NULL);
}

void loader_gate_enter(void)
{
    if (agent_tls.gate_depth++ > 0)
        return;
    int counted = 0;
    for (;;) {
        __atomic_fetch_add(&inside, 1, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&closed, __ATOMIC_SEQ_CST))
            break;
        /* A fork is being prepared: step out and wait for its end. */
        __atomic_fetch_sub(&inside, 1, __ATOMIC_SEQ_CST);
        if (!counted++)
            __atomic_fetch_add(&waiting, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&closed, __ATOMIC_SEQ_CST))
            nap(GATE_NAP_NS);
    }
    if (counted)
        __atomic_fetch_sub(&waiting, 1, __ATOMIC_SEQ_CST);
}

void loader_gate_leave(void)
{
    if (--agent_tls.gate_depth == 0)
        __atomic_fetch_sub(&inside, 1, __ATOMIC_SEQ_CST);
}

FORK_PATH void loader_fork_prepare(void)
{
    long waited = 0;
    /* Calls kept out by the last fork go first (they then hold this one
     * up only as long as they take). */
    while (__atomic_load_n(&waiting, __ATOMIC_SEQ_CST) > 0 &&
           !__atomic_load_n(&closed, __ATOMIC_SEQ_CST) &&
           waited < GATE_WAIT_NS) {
        nap(GATE_NAP_NS);
        waited += GATE_NAP_NS;
    }
    __atomic_fetch_add(&closed, 1, __ATOMIC_SEQ_CST);
    /* The forking thread's own entries (the host forked from inside an
     * agent call: never seen) cannot leave while it waits. */
    int own = agent_tls.gate_depth > 0;
    for (; __atomic_load_n(&inside, __ATOMIC_SEQ_CST) > own;
         waited += GATE_NAP_NS) {
        if (waited >= GATE_WAIT_NS) {
            __atomic_fetch_add(&gave_up, 1, __ATOMIC_RELAXED);
            return;
        }
        nap(GATE_NAP_NS);
    }
}

FORK_PATH void loader_fork_parent(void)
{
    __atomic_fetch_sub(&closed, 1, __ATOMIC_SEQ_CST);
}

FORK_PATH void loader_fork_child(void)
{
    /* The parent's other threads did not come along, nor did the forks
     * other threads of the parent were preparing. */
    FORK_SET_ATOMIC(inside, agent_tls.gate_depth > 0);
    FORK_SET_ATOMIC(waiting, 0);
    __atomic_store_n(&closed, 0, __ATOMIC_SEQ_CST);
}

unsigned long loader_fork_gave_up(void)
{
    return __atomic_load_n(&gave_up, __ATOMIC_RELAXED);
}

int loader_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *),
                        void *data)
{
    if (!real_dl_iterate_phdr) {
        real_dl_iterate_phdr = next_symbol("dl_iterate_phdr");
        if (!real_dl_iterate_phdr)
            return 0;
    }
    loader_gate_enter();
    /* Holding the loader lock: the signal handlers leave this thread's
     * stack alone meanwhile (phdr_hooks.c). */
    agent_tls.in_loader++;
    int ret = real_dl_iterate_phdr(cb, data);
    agent_tls.in_loader--;
    loader_gate_leave();
    return ret;
}

int loader_addr(const void *addr, Dl_info *info)
{
    loader_gate_enter();
    int ret = dladdr(addr, info);
    loader_gate_leave();
    return ret;
}

void *loader_open(const char *file, int mode)
{
    loader_gate_enter();
    void *h = dlopen(file, mode);
    loader_gate_leave();
    return h;
}

void *loader_sym(void *handle, const char *name)
{
    loader_gate_enter();
    void *p = dlsym(handle, name);
    loader_gate_leave();
    return p;
}

int loader_info(void *handle, int request, void *arg)
{
    loader_gate_enter();
    int ret = dlinfo(handle, request, arg);
    loader_gate_leave();
    return ret;
}
