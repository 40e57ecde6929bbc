/*
 * Stack capture outside signal context (agent/stack.c). The capture for
 * threads that may hold their allocator's lock (stack_capture_no_alloc)
 * never allocates: before the thread is readied it walks frame by frame,
 * afterwards fast, until a dlclose; every walk gives the same stack. The
 * first fast walk of a thread that was not readied does allocate
 * (libunwind's thread-local block), which is why the other walk exists.
 */
#include "agent/agent.h"
#include "harness.h"

#include <malloc.h>
#include <pthread.h>

enum op { NO_ALLOC, CAPTURE, PREPARE, UNLOAD };

struct grabbed {
    uintptr_t pcs[STACK_MAX];
    int n;
    size_t allocated; /* bytes the call allocated (all arenas) */
    int readied;      /* the thread may walk fast inside locks */
    uintptr_t caller; /* the thread's call site of grab, as in pcs */
};

/* Bytes in use from the allocator: glibc's count, or the sanitizer
 * runtime's when it owns malloc (the sanitizer build of this test). */
extern size_t __sanitizer_get_current_allocated_bytes(void)
    __attribute__((weak));

static size_t in_use(void)
{
    if (__sanitizer_get_current_allocated_bytes)
        return __sanitizer_get_current_allocated_bytes();
    return mallinfo2().uordblks;
}

/* Every capture from one call instruction, called from one call
 * instruction: the stacks from grab outwards must be identical. */
__attribute__((noinline)) static void grab(enum op op, struct grabbed *g)
{
    size_t before = in_use();
    g->n = 0;
    if (op == PREPARE)
        stack_thread_prepare();
    else if (op == UNLOAD)
        stack_loader_changing();
    else
        g->n = (op == CAPTURE ? stack_capture
                              : stack_capture_no_alloc)(g->pcs, STACK_MAX);
    g->allocated = in_use() - before;
    g->readied = agent_tls.unwind_epoch == stack_loader_epoch;
    g->caller = (uintptr_t)__builtin_return_address(0) - 1;
    __asm__ volatile("" ::: "memory"); /* no tail call */
}

struct script {
    const enum op *ops;
    int n;
    struct grabbed g[8];
};

/* A thread that has not allocated before: its first allocation is counted
 * in use whatever its size (glibc's per-thread cache is created then). */
static void *fresh_thread(void *arg)
{
    struct script *s = arg;
    for (volatile int i = 0; i < s->n; i++) /* not unrolled */
        grab(s->ops[i], &s->g[i]);
    __asm__ volatile("" ::: "memory");
    return NULL;
}

static void run(struct script *s)
{
    pthread_t t;
    assert_true(pthread_create(&t, NULL, fresh_thread, s) == 0);
    pthread_join(t, NULL);
}

/* The stacks of every capture in s, from grab's frame outwards, are the
 * same, and at least grab, fresh_thread and the thread's start. */
static void expect_same_stacks(struct script *s)
{
    const struct grabbed *first = NULL;
    int first_from = 0;
    for (int i = 0; i < s->n; i++) {
        const struct grabbed *g = &s->g[i];
        if (s->ops[i] != NO_ALLOC && s->ops[i] != CAPTURE)
            continue;
        int from = -1;
        for (int k = 1; k < g->n; k++)
            if (g->pcs[k] == g->caller)
                from = k - 1;
        expect_true(from >= 0 && g->n - from >= 3);
        if (from < 0)
            continue;
        if (!first) {
            first = g;
            first_from = from;
            continue;
        }
        expect_int_eq(g->n - from, first->n - first_from);
        for (int k = 0; from + k < g->n && first_from + k < first->n; k++)
            expect_true(g->pcs[from + k] == first->pcs[first_from + k]);
    }
}

TEST(unreadied_thread_walks_without_allocating)
{
    static const enum op ops[] = {NO_ALLOC, NO_ALLOC, CAPTURE, NO_ALLOC};
    struct script s = {.ops = ops, .n = 4};
    run(&s);
    /* Not readied: the slow walk, nothing allocated. */
    expect_int_eq(s.g[0].readied, 0);
    expect_int_eq(s.g[1].readied, 0);
    expect_int_eq((long)s.g[0].allocated, 0);
    expect_int_eq((long)s.g[1].allocated, 0);
    /* The first fast walk creates libunwind's thread-local block. */
    expect_int_eq(s.g[2].readied, 1);
    expect_true(s.g[2].allocated > 0);
    /* From then on the fast walk, which allocates nothing more. */
    expect_int_eq((long)s.g[3].allocated, 0);
    expect_same_stacks(&s);
}

TEST(readied_thread_walks_fast_until_a_dlclose)
{
    static const enum op ops[] = {PREPARE,  NO_ALLOC, NO_ALLOC, UNLOAD,
                                  NO_ALLOC, CAPTURE,  NO_ALLOC};
    struct script s = {.ops = ops, .n = 7};
    run(&s);
    /* Readying allocates the block, so the fast walks in locks do not. */
    expect_int_eq(s.g[0].readied, 1);
    expect_true(s.g[0].allocated > 0);
    expect_int_eq(s.g[1].readied, 1);
    expect_int_eq((long)s.g[1].allocated, 0);
    expect_int_eq((long)s.g[2].allocated, 0);
    /* A dlclose: walks in locks are slow again, until a capture from a
     * safe place readies the thread again. */
    expect_int_eq(s.g[3].readied, 0);
    expect_int_eq(s.g[4].readied, 0);
    expect_int_eq((long)s.g[4].allocated, 0);
    expect_int_eq(s.g[5].readied, 1);
    expect_int_eq(s.g[6].readied, 1);
    expect_int_eq((long)s.g[6].allocated, 0);
    expect_same_stacks(&s);
}

int main(void)
{
    stack_init();
    /* The agent's code is this whole program here: keep every frame, so
     * that grab and its callers are in the stacks. */
    stack_self_start = stack_self_end = 0;
    return run_tests(unreadied_thread_walks_without_allocating,
                     readied_thread_walks_fast_until_a_dlclose, NULL);
}
