/* What a module's fork step (agent/fork.c calls them, in its order) uses
 * to cost the fork as few pages as it can.
 *
 * After fork() every page of the process is shared copy-on-write: the
 * first write to one, in the parent or in the child, is a page fault, and
 * so is the child's first look at a page of code (the kernel maps code
 * again at the fault, 64 KiB around it). A step that writes what is
 * already there, or whose code lies between unrelated functions, costs a
 * forking process (a shell running a script, a prefork server) one fault
 * a fork for nothing. So the steps lie together (FORK_PATH), and they
 * write a value only where it differs (reading a page the process has
 * used faults nothing): in a process whose agent is idle, most child
 * steps then write nothing. Entered only from the fork steps: prepare
 * and parent on the forking thread, child and after in the child.
 */

#ifndef PPROF_AGENT_FORK_STEP_H
#define PPROF_AGENT_FORK_STEP_H

#include <stddef.h>

/* The fork steps' code, and the helpers they call on every fork: kept
 * together in the agent's code (the linker gathers .text.hot.*), so a
 * child's steps touch one or two pages of code instead of one for each
 * module. */
#define FORK_PATH __attribute__((section(".text.hot.pprof_fork")))

/* The variables every fork writes (the fork gate's count, the heap
 * table's flag, the child's identity, the server's state) and those a
 * child step reads to know whether there is anything to reset: gathered
 * in one section of their own, so that they share one page, which the
 * fork writes anyway. A variable alone on a page the process never
 * touched would cost a fault just to be read (a page of zeros is mapped
 * at its first read). Small variables only, marked at their definition:
 * `static int x FORK_STATE;` or `static int x FORK_STATE = -1;`. */
#define FORK_STATE __attribute__((section("pprof_fork_state")))

/* var = val, written only when it differs. */
#define FORK_SET(var, val)                                                     \
    do {                                                                       \
        if ((var) != (val))                                                    \
            (var) = (val);                                                     \
    } while (0)

/* The same for a variable other threads read atomically. */
#define FORK_SET_ATOMIC(var, val)                                              \
    do {                                                                       \
        if (__atomic_load_n(&(var), __ATOMIC_RELAXED) != (val))                \
            __atomic_store_n(&(var), (val), __ATOMIC_SEQ_CST);                 \
    } while (0)

/* Copies n bytes of fresh over dst, only if they differ (a lock back to
 * its initializer, a table back to zeros). Calls nothing: a C-library
 * call a child makes only here is a lazy binding and a page of the C
 * library's code in every fork. Async-signal-safe. Does not allocate. */
static inline void fork_reset(void *dst, const void *fresh, size_t n)
{
    volatile unsigned char *d = dst;
    const unsigned char *f = fresh;
    size_t i = 0;
    while (i < n && d[i] == f[i])
        i++;
    for (; i < n; i++)
        d[i] = f[i];
}

/* Zeros n bytes at dst, only if they are not zeros already. The same
 * contract as fork_reset(). */
static inline void fork_zero(void *dst, size_t n)
{
    volatile unsigned char *d = dst;
    size_t i = 0;
    while (i < n && d[i] == 0)
        i++;
    for (; i < n; i++)
        d[i] = 0;
}

#endif
