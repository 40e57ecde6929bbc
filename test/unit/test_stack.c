/*
 * Stack capture outside signal context (agent/stacks/stack.c). The capture for
 * threads that may hold their allocator's lock (stack_capture_no_alloc)
 * never allocates: it only walks, with the stack bounds the thread learnt
 * at its start (stack_thread_prepare) or in an earlier stack_capture();
 * a thread that never learnt them gets no stack there. Every walk gives
 * the same stack.
 */
#include "agent/stacks/cfi.h"
#include "agent/stacks/objects.h"
#include "agent/stacks/stack.h"
#include "harness.h"
#include "in_use.h"

#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <string.h>

enum op { NO_ALLOC, CAPTURE, PREPARE };

struct grabbed {
    uintptr_t pcs[STACK_MAX];
    int n;
    size_t allocated; /* bytes the call allocated (all arenas) */
    int readied;      /* the thread knows its stack bounds */
    uintptr_t caller; /* the thread's call site of grab, as in pcs */
};

/* Every capture from one call instruction, called from one call
 * instruction: the stacks from grab outwards must be identical. */
__attribute__((noinline)) static void grab(enum op op, struct grabbed *g)
{
    size_t before = in_use();
    g->n = 0;
    if (op == PREPARE)
        stack_thread_prepare();
    else
        g->n = (op == CAPTURE ? stack_capture
                              : stack_capture_no_alloc)(g->pcs, STACK_MAX);
    g->allocated = in_use() - before;
    uintptr_t lo, hi;
    g->readied = cfi_stack_bounds(&lo, &hi) == 0;
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
        if (g->n == 0 && !g->readied)
            continue; /* no stack without bounds: checked by the caller */
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

TEST(unreadied_thread_walks_once_it_learnt_its_stack)
{
    static const enum op ops[] = {NO_ALLOC, CAPTURE, NO_ALLOC, NO_ALLOC};
    struct script s = {.ops = ops, .n = 4};
    run(&s);
    /* Bounds unknown where it may not allocate: learnt from
     * /proc/self/maps (a thread created past the agent's pthread_create,
     * as jemalloc's are), so the first walk already has the stack and
     * allocated nothing. */
    expect_int_eq(s.g[0].readied, 1);
    expect_true(s.g[0].n >= 3);
#ifndef __SANITIZE_THREAD__
    /* (ThreadSanitizer's open/read interceptors allocate for their own
     * descriptor tracking.) */
    expect_int_eq((long)s.g[0].allocated, 0);
#endif
    /* From then on walks in and outside locks give the same stack, and
     * those in locks allocate nothing. */
    expect_int_eq(s.g[1].readied, 1);
    expect_int_eq(s.g[2].readied, 1);
    expect_int_eq((long)s.g[2].allocated, 0);
    expect_int_eq((long)s.g[3].allocated, 0);
    expect_same_stacks(&s);
}

TEST(readied_thread_walks_without_allocating)
{
    static const enum op ops[] = {PREPARE, NO_ALLOC, NO_ALLOC, CAPTURE,
                                  NO_ALLOC};
    struct script s = {.ops = ops, .n = 5};
    run(&s);
    expect_int_eq(s.g[0].readied, 1);
    for (int i = 1; i < 5; i++) {
        expect_true(s.g[i].n > 0);
        if (s.ops[i] == NO_ALLOC)
            expect_int_eq((long)s.g[i].allocated, 0);
    }
    expect_same_stacks(&s);
}

/* With the first build deferred (the start delay), captures look each
 * frame up without tables, and build them once those lookups have cost
 * about what the build does: one frame per KiB of loaded code. */
TEST(deferred_tables_are_built_once_walks_paid_for_them)
{
    expect_true(cfi_current == NULL);
    struct grabbed first, g;
    uint64_t frames_at_build = 0;
    int captures = 0, after = 0;
    /* One call site: every capture's stack is the same, without tables
     * and, for the last two, with them. */
    for (; captures < 200000 && after < 2; captures++) {
        if (cfi_current)
            after++;
        else
            frames_at_build = cfi_walk_counters.no_table;
        grab(CAPTURE, &g);
        if (captures == 0)
            first = g;
        if (g.n != first.n ||
            memcmp(g.pcs, first.pcs, (size_t)g.n * sizeof *g.pcs)) {
            expect_true(!"a stack differs");
            break;
        }
    }
    expect_true(first.n >= 3);
    expect_int_eq(after, 2);
    /* Built after about one frame per KiB of code, not at once. */
    size_t code_kib = 0;
    for (size_t i = 0; cfi_current && i < cfi_current->n; i++)
        code_kib +=
            (cfi_current->objects[i].hi - cfi_current->objects[i].lo) >> 10;
    fprintf(stderr, "built after %d captures, %llu frames looked up, %zu KiB "
                    "of code in tables\n",
            captures - after, (unsigned long long)frames_at_build, code_kib);
    expect_true(captures > 10);
    expect_true(frames_at_build * 2 >= code_kib);
    expect_true(frames_at_build <= code_kib * 2 + 64);
    cfi_tables_refresh();
}

int main(void)
{
    stack_init();
    /* As the agent's init.c with a start delay; the first test ends it.
     * (The agent's phdr_hooks.c, not linked in here, resolves the lookup
     * that walks without tables use.) */
    agent_find_object = (int (*)(void *, struct dl_find_object *))dlsym(
        RTLD_DEFAULT, "_dl_find_object");
    cfi_tables_defer();
    /* The agent's code is this whole program here: keep every frame, so
     * that grab and its callers are in the stacks. */
    stack_self_start = stack_self_end = 0;
    return run_tests(deferred_tables_are_built_once_walks_paid_for_them,
                     unreadied_thread_walks_once_it_learnt_its_stack,
                     readied_thread_walks_without_allocating, NULL);
}
