/*
 * fork: the agent's one pthread_atfork registration and its ordered lists.
 * Every module that keeps state across fork exposes x_fork_prepare /
 * _parent / _child; the order is here, and only here.
 *
 * Why this order:
 * - Registered by fork_init, in the agent's constructor (or an attach),
 *   before any other library's constructor that runs after it registers
 *   its own handlers, so that the child's first step is
 *   guard_fork_child(): the forking thread's cached thread id is
 *   forgotten before any child step (or a child handler registered later,
 *   whose malloc enters the agent) takes a spinlock, which records its
 *   owner's id. A process where the agent is off registers nothing.
 * - prepare: the shell first (it notes the forking pid, takes no lock),
 *   then the heap table's shard locks (after waiting for samplers in
 *   flight), then the fork gate (loader.c: the agent's calls that take the
 *   C library's locks fork does not reset leave, and no new one starts).
 *   The gate comes after the samplers: a host thread's sampler walks its
 *   stack through the gate, and closed first, the gate kept out a sampler
 *   the heap step then waited for (both waited for ever: a CPU profile's
 *   drain hung behind the closed gate). The agent's threads inside the gate
 *   never sample. Then the CPU and the wall profilers block their signals
 *   last, so no timer signal interrupts the fork itself (clone() would
 *   restart for ever).
 * - parent undoes prepare in reverse: the signal mask, the gate, the locks.
 * - child: the thread id, the fork gate, the signal-mask watchers (sigmask), the CPU
 *   and wall profile states, the heap locks; then the registries the parent's other
 *   threads may have been using: descriptors (fds), the symbolizer's lock,
 *   a threads dump in flight; then the shell (dumper, server, and a flag
 *   for the child's own start); last the stack walker's shared
 *   state: the parent's other threads, registered as readers of the
 *   unwind tables and the program-header snapshot, are gone, and a
 *   refresh in the child would wait for them for ever.
 * - after: the child's own start (a thread, files), once the C library's
 *   fork() returned in the child. The child steps run first of all child
 *   handlers (ours was registered first), while the host's own may still
 *   hold what its prepare handler took: a program with its own malloc
 *   (PartitionAlloc, a static jemalloc, mimalloc) takes its lock there
 *   and lets it go in its child handler, and a thread created before that
 *   waits for it for ever. So the child steps reset what the agent owns
 *   and flip flags, nothing more: no allocation, no thread, no file, no
 *   lock the host may hold. The interposed fork() and daemon() (whose
 *   fork the C library makes inside, out of an interposer's sight) run the
 *   shell's after step when the real call returns 0. A child made another
 *   way (_Fork, vfork, a raw clone) gets no after step here; the shell
 *   looks for a pending start at its other interposers too.
 *
 * Every step, here and in the modules, is FORK_PATH and writes only what
 * differs (agent/fork_step.h): each page a step writes or first reads
 * after the fork is a page fault in every fork of the host.
 *
 * When the agent is off, and under a C library other than glibc (musl),
 * nothing is registered at all. Contexts: prepare and parent on the
 * forking thread, child and after on the child's only thread.
 */
#include "agent/fork.h"

#include "agent/threads/blocked.h"
#include "agent/core/arm.h"
#include "agent/stacks/cfi.h"
#include "agent/cpu/cpu.h"
#include "agent/host/fds.h"
#include "agent/fork_step.h"
#include "agent/guard.h"
#include "agent/heap/heap.h"
#include "agent/core/loader.h"
#include "agent/core/next_symbol.h"
#include "agent/stacks/phdr_cache.h"
#include "agent/host/proc.h"
#include "agent/host/sigmask.h"
#include "agent/symbols/symbols.h"
#include "agent/threads/threads.h"
#include "agent/trace/trace.h"
#include "agent/wall/wall.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static int modules_on;
static void (*shell_prepare)(void);
static void (*shell_child)(void);
static void (*shell_after)(void);

FORK_PATH static void fork_prepare(void)
{
    if (!modules_on)
        return;
    if (shell_prepare)
        shell_prepare();
    if (heap_buckets)
        heap_table_fork_prepare();
    loader_fork_prepare();
    cpu_timer_fork_prepare();
    wall_fork_prepare();
}

FORK_PATH static void fork_parent(void)
{
    if (!modules_on)
        return;
    wall_fork_parent();
    cpu_timer_fork_parent();
    loader_fork_parent();
    if (heap_buckets)
        heap_table_fork_parent();
}

/* A chrooted process's threads book holds the child's only thread. */
FORK_PATH static void book_fork_child(void)
{
    sigset_t now;
    if (__atomic_load_n(&proc_book_on, __ATOMIC_RELAXED) &&
        sigmask_real(SIG_BLOCK, NULL, &now) == 0)
        proc_book_fork_child(&now);
}

FORK_PATH static void fork_child(void)
{
    guard_fork_child();
    if (!modules_on)
        return;
    loader_fork_child();
    arm_clear(); /* the parent's start is not the child's (after step) */
    sigmask_fork_child();
    book_fork_child();
    cpu_timer_fork_child();
    wall_fork_child();
    if (heap_buckets)
        heap_table_fork_child();
    fds_fork_child();
    trace_fork_child();
    symbols_fork_child();
    threads_fork_child();
    blocked_notes_fork_child();
    if (shell_child)
        shell_child();
    phdr_cache_fork_child();
    cfi_tables_fork_child();
}

/* What pthread_atfork does (a static copy from libc_nonshared.a, linked at
 * the far end of the agent's code, where it cost every process one more
 * page fault to run once): the C library's registration, with the
 * agent's own handle. glibc's name, a weak reference: musl has none (its
 * loader would refuse the agent), and there the agent stands aside and
 * registers nothing. */
extern int __register_atfork(void (*)(void), void (*)(void), void (*)(void),
                             void *) __attribute__((weak));
extern void *__dso_handle;

void fork_init(void (*prepare)(void), void (*child)(void),
               void (*after)(void))
{
    /* Once (an attach after a detach calls this again), and only in a
     * process where the agent is on: a pass-through (an exec'd
     * descendant, PPROF_ENABLE=0) takes none of the agent's locks, and
     * the registration cost each such process two page faults in the C
     * library. */
    static int registered;
    if (!registered++ && loader_is_glibc())
        __register_atfork(fork_prepare, fork_parent, fork_child,
                          __dso_handle);
    shell_prepare = prepare;
    shell_child = child;
    shell_after = after;
    modules_on = 1;
}

/* ---- after every fork handler: the interposed fork() and daemon() -------- */

/* In the child, once the C library's call returned there; errno kept. */
FORK_PATH static void fork_after(void)
{
    if (!modules_on || !shell_after)
        return;
    int saved = errno;
    shell_after();
    errno = saved;
}

/* The next definition, looked up at the first call (a constructor of
 * another library may fork before the agent's ran). */
FORK_PATH static void *next(void **slot, const char *name)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = next_symbol(name);
        __atomic_store_n(slot, f, __ATOMIC_RELEASE);
    }
    return f;
}

static void *real_fork, *real_daemon;

FORK_PATH EXPORT pid_t fork(void)
{
    pid_t (*f)(void) = (pid_t(*)(void))next(&real_fork, "fork");
    pid_t pid = f();
    if (pid == 0)
        fork_after();
    return pid;
}

FORK_PATH EXPORT int daemon(int nochdir, int noclose)
{
    int (*f)(int, int) = (int (*)(int, int))next(&real_daemon, "daemon");
    int ret = f(nochdir, noclose);
    if (ret == 0)
        fork_after(); /* the parent ended inside */
    return ret;
}
