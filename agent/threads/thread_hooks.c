/*
 * pthread_create interposer: records the creating stack for the
 * threadcreate profile and marks threads created by the agent itself (the
 * HTTP server's) so that they are never sampled or listed as the host's.
 *
 * Runs on the host's threads inside pthread_create; takes one small start
 * record from a pool (the host's allocator, with the guard entered, when
 * the pool is all in use), and
 * forwards everything else to the real pthread_create unchanged. The start
 * wrapper also gives each host thread its CPU-profile timer while a profile
 * runs, and takes it away when the thread ends (cpu_timer.c); the agent's
 * own threads are recorded so the profiler never samples them.
 */
#include "agent/threads/blocked.h"
#include "agent/compiler.h"
#include "agent/cpu/cpu.h"
#include "agent/guard.h"
#include "agent/core/labels.h"
#include "agent/core/next_symbol.h"
#include "agent/core/own_memory.h"
#include "agent/host/proc.h"
#include "agent/host/sigmask.h"
#include "agent/stacks/stack.h"
#include "agent/stacks/stack_table.h"
#include "agent/threads/thread_hooks.h"
#include "agent/trace/trace.h"
#include "agent/wall/wall.h"
#include "agent/core/arm.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What pthread_cleanup_push and _pop expand to in C with glibc: weak
 * references, which musl's loader (without these names) resolves to 0
 * instead of refusing the agent. They run only in thread_start, which a
 * thread reaches only while the agent is on, never under musl (the agent
 * stands aside there, process/init.c). */
#pragma weak __pthread_register_cancel
#pragma weak __pthread_unregister_cancel

int (*next_pthread_create)(pthread_t *, const pthread_attr_t *,
                           void *(*)(void *), void *);

struct stack_table *threadcreate_table;
long threads_created;

struct start_record {
    void *(*fn)(void *);
    void *arg;
    int agent_thread;
    int unnoted; /* an agent thread whose stack is not noted */
    const struct pprof_label_set *labels; /* the creator's, inherited */
    uint64_t trace_key; /* the creation's record in a trace, 0: none */
    uint32_t creator;   /* the creating thread's id, with trace_key */
};

/*
 * Start records come from a small pool, a malloc'd one when it is all in
 * use. The new thread copies its record and gives the slot back. Freeing
 * a malloc'd record there was the new thread's first call into the
 * allocator, and glibc answers it by giving the thread a malloc arena of
 * its own (128 MiB reserved, trimmed, protected): for the agent's starter
 * thread, which never allocates, in every process the agent is preloaded
 * into, and for host threads that never allocate either.
 */
#define RECORD_SLOTS 64
static struct start_record record_pool[RECORD_SLOTS];
static int record_used[RECORD_SLOTS];

/* A record, or NULL. With the guard entered (the fallback allocates). */
static struct start_record *record_take(void)
{
    for (int i = 0; i < RECORD_SLOTS; i++) {
        int zero = 0;
        if (__atomic_load_n(&record_used[i], __ATOMIC_RELAXED) == 0 &&
            __atomic_compare_exchange_n(&record_used[i], &zero, 1, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return &record_pool[i];
    }
    return malloc(sizeof(struct start_record));
}

static void record_give(struct start_record *r)
{
    if (r >= record_pool && r < record_pool + RECORD_SLOTS) {
        __atomic_store_n(&record_used[r - record_pool], 0, __ATOMIC_RELEASE);
        return;
    }
    guard_enter();
    free(r);
    guard_leave();
}

/*
 * 1 when ThreadSanitizer's pthread_create comes before the agent's (its
 * runtime linked into the program, as clang links it, or preloaded before
 * the agent): it then hands the agent its own start routine, and
 * thread_start runs on the new thread before that routine has set the
 * thread up for TSan. Any call TSan intercepts there (the allocation inside
 * pthread_getattr_np, a file opened, a signal mask changed) finds no
 * thread state and faults. The start then does nothing before calling on
 * but set the agent's own flags: an agent thread's stack goes unnoted, and
 * a host thread created during a CPU profile gets no timer of its own
 * (docs/signals-and-cancellation.md).
 */
static int start_bare;

/* The agent's own pthread_create (below), by an address the loader does
 * not rebind to the first definition as it does the exported name's. */
extern __typeof__(pthread_create) own_pthread_create
    __attribute__((alias("pthread_create"), visibility("hidden"), nothrow));

void thread_hooks_init(void)
{
    if (!next_pthread_create)
        next_pthread_create = next_symbol("pthread_create");
    void *first = dlsym(RTLD_DEFAULT, "pthread_create");
    start_bare = dlsym(RTLD_DEFAULT, "__tsan_init") && first &&
                 first != (void *)own_pthread_create;
}

/* Runs when a host thread ends, by return or pthread_exit/cancel; fn is
 * its start routine. */
static void thread_exit(void *fn)
{
    guard_enter();
    cpu_thread_exiting((uintptr_t)fn);
    wall_thread_exiting();
    blocked_thread_exiting();
    if (unlikely(__atomic_load_n(&proc_book_on, __ATOMIC_RELAXED)))
        proc_book_forget_self();
    guard_leave();
    if (unlikely(trace_on)) {
        char name[16] = "";
        prctl(PR_GET_NAME, name);
        trace_instant(TRACE_EXIT, 0, 0, name, strnlen(name, 15));
    }
}

/* Set by thread_hooks_next_unnoted, taken by the next agent thread's
 * record; the creating thread only (a race with another agent thread's
 * creation could only move which stack goes unnoted). */
static int next_unnoted;

void thread_hooks_next_unnoted(void)
{
    __atomic_store_n(&next_unnoted, 1, __ATOMIC_RELAXED);
}

/*
 * The thread-vector block (glibc's DTV) of each running agent thread, held
 * where valgrind's leak check looks for pointers. glibc allocates it with
 * malloc and keeps, in the thread's control block, only a pointer past
 * its first entry: an agent thread still running at exit (the watch, the
 * server's; detached, never asked to end) left its block "possibly lost",
 * and valgrind --error-exitcode failed a clean host that lived past the
 * start delay. A pointer to the block's start makes it "still reachable",
 * which is no error; nothing is done at exit. A slot is given back when
 * the thread returns. A block glibc moves later (a library with TLS
 * dlopened after the thread started) is not followed: that thread's new
 * block is reported as before. Other C libraries, other machines: nothing.
 */
#define DTV_SLOTS 64
static void *dtv_blocks[DTV_SLOTS];

/* The start of the calling thread's DTV block, or NULL: the control block
 * holds &dtv[1], and a DTV entry is two pointers. */
static void *dtv_block(void)
{
    uintptr_t *dtv = NULL;
#if defined(__GLIBC__) && defined(__x86_64__)
    __asm__("mov %%fs:8, %0" : "=r"(dtv));
#elif defined(__GLIBC__) && defined(__aarch64__)
    uintptr_t **tp;
    __asm__("mrs %0, tpidr_el0" : "=r"(tp));
    dtv = tp ? tp[0] : NULL;
#endif
    return dtv ? (void *)(dtv - 2) : NULL;
}

/* Notes the calling thread's block; returns its slot, or -1. */
static int dtv_note(void)
{
    void *block = dtv_block();
    for (int i = 0; block && i < DTV_SLOTS; i++) {
        void *none = NULL;
        if (__atomic_compare_exchange_n(&dtv_blocks[i], &none, block, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return i;
    }
    return -1;
}

static void dtv_forget(int slot)
{
    if (slot >= 0)
        __atomic_store_n(&dtv_blocks[slot], NULL, __ATOMIC_RELAXED);
}

/* Chrooted: this new host thread goes into the threads book
 * (proc_book.c) with its mask, before a CPU profile may arm it. */
static void book_note(void)
{
    sigset_t now;
    if (sigmask_real(SIG_BLOCK, NULL, &now) == 0)
        proc_book_note_self(&now);
}

static void *thread_start(void *p)
{
    struct start_record r = *(struct start_record *)p;
    record_give(p);
    labels_current = r.labels; /* as a goroutine inherits its creator's */
    if (r.agent_thread) {
        agent_tls.agent_thread = 1;
        cpu_agent_thread(); /* atomics and the agent's own syscall() */
        if (start_bare)
            return r.fn(r.arg);
        /* Its stack is the agent's memory, for /debug/memory. */
        void *stack = NULL;
        size_t stack_size = 0;
        pthread_attr_t attr;
        if (!r.unnoted && pthread_getattr_np(pthread_self(), &attr) == 0) {
            pthread_attr_getstack(&attr, &stack, &stack_size);
            pthread_attr_destroy(&attr);
        }
        own_memory_add_stack(stack, stack_size);
        int dtv_slot = dtv_note();
        void *ret = r.fn(r.arg);
        cpu_agent_thread_end();
        dtv_forget(dtv_slot);
        own_memory_remove(stack, stack_size);
        return ret;
    }
    /* A CPU profile running now gives this thread its timer; its samples
     * in locks may walk fast. Not before TSan's start routine (start_bare);
     * the end is after it, where TSan's thread state still holds. */
    if (!start_bare) {
        guard_enter();
        if (unlikely(__atomic_load_n(&proc_book_on, __ATOMIC_RELAXED)))
            book_note();
        cpu_thread_started();
        stack_thread_prepare();
        guard_leave();
        if (unlikely(trace_on) && r.trace_key)
            trace_instant(TRACE_START, r.trace_key, r.creator, NULL, 0);
    }
    void *ret;
    pthread_cleanup_push(thread_exit, (void *)r.fn);
    ret = r.fn(r.arg);
    pthread_cleanup_pop(1);
    return ret;
}

static void record_creation(void)
{
    uintptr_t pcs[STACK_MAX];
    int n = stack_capture_no_alloc(pcs, STACK_MAX);
    if (n == 0) {
        pcs[0] = FRAME_UNKNOWN;
        n = 1;
    }
    struct stack_entry *e = stack_table_get(threadcreate_table, pcs, n, 0);
    if (e)
        stack_entry_add(e, 0, 1);
    __atomic_fetch_add(&threads_created, 1, __ATOMIC_RELAXED);
}

#define AGENT_STACK_MIN (2u << 20)

/* A copy of attr's detach state with at least AGENT_STACK_MIN of stack.
 * Returns 0 or an error number (then attr is used as it is). */
static int own_thread_attr(const pthread_attr_t *attr, pthread_attr_t *out)
{
    int detach = PTHREAD_CREATE_JOINABLE;
    size_t size = 0;
    if (attr) {
        pthread_attr_getdetachstate(attr, &detach);
        pthread_attr_getstacksize(attr, &size);
    }
    if (size >= AGENT_STACK_MIN)
        return EINVAL;
    int err = pthread_attr_init(out);
    if (err)
        return err;
    pthread_attr_setdetachstate(out, detach);
    pthread_attr_setstacksize(out, AGENT_STACK_MIN);
    return 0;
}

__attribute__((visibility("default"))) int
pthread_create(pthread_t *thread, const pthread_attr_t *attr,
               void *(*fn)(void *), void *arg)
{
    arm_poke(ARM_WAIT, 0);
    if (unlikely(!next_pthread_create)) {
        thread_hooks_init();
        if (!next_pthread_create)
            return EAGAIN;
    }
    if (!agent_ready)
        return next_pthread_create(thread, attr, fn, arg);

    int agent = guard_active();
    guard_enter();
    if (!agent)
        record_creation();
    struct start_record *r = record_take();
    guard_leave();
    if (!r)
        return next_pthread_create(thread, attr, fn, arg);
    r->fn = fn;
    r->arg = arg;
    r->agent_thread = agent;
    r->unnoted = agent && __atomic_exchange_n(&next_unnoted, 0, __ATOMIC_RELAXED);
    r->labels = agent ? NULL : labels_current;
    r->trace_key = 0;
    if (unlikely(trace_on) && !agent) {
        r->trace_key = trace_next_key();
        r->creator = (uint32_t)syscall(SYS_gettid);
        trace_instant(TRACE_CREATE, r->trace_key, 0, NULL, 0);
    }
    /* The agent's own threads (civetweb asks for 100 KiB) get room for
     * symbolization: libdw recurses deeply on large compile units. */
    pthread_attr_t big;
    if (agent && own_thread_attr(attr, &big) == 0) {
        int err = next_pthread_create(thread, &big, thread_start, r);
        pthread_attr_destroy(&big);
        if (err)
            record_give(r);
        return err;
    }
    int err = next_pthread_create(thread, attr, thread_start, r);
    if (err)
        record_give(r);
    return err;
}
