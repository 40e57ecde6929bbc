/*
 * attach_target's work on demand, for the profiles an attach must record
 * (test/integration/attach_heap.sh): the "worker" thread waits for
 * SIGUSR1 and SIGUSR2 (blocked in every thread, so no other call is ever
 * interrupted) and the "holder" thread for a byte on a pipe; both are
 * started before any attach.
 *
 *   SIGUSR1  alloc_after_attach: malloc, calloc and realloc of a known
 *            set of blocks, some freed at once, the rest kept; the blocks
 *            allocated at the program's start are freed or reallocated
 *            (the first time only). Prints what the heap profile's leaves
 *            one_block and alloc_after_attach must hold together, as
 *            heap_sites.awk prints them: "heap round=N alloc_after_attach
 *            INUSE_OBJECTS INUSE_BYTES ALLOC_OBJECTS ALLOC_BYTES". Then
 *            10 rounds in which the
 *            holder keeps the mutex "hot" 20 ms inside holder_work while
 *            the worker waits for it; prints "mutex round=N wait_ns=W",
 *            the worker's own measure of its waits.
 *   SIGUSR2  frees every block kept; prints "freed round=N blocks=K".
 */
#ifndef ATTACH_WORK_H
#define ATTACH_WORK_H

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "timing.h"

#define PRE_BLOCKS 64
#define PRE_REALLOCS 16
#define WORK_BLOCKS 2000
#define KEPT_MAX (2 * WORK_BLOCKS)
#define HOLDS 10

static void *pre_blocks[PRE_BLOCKS]; /* allocated before any attach */
static void *kept[KEPT_MAX];
static int nkept;
static int work_round;

struct heap_truth {
    long io, ib, ao, ab;
};

static void keep(void *p, long size, struct heap_truth *t)
{
    kept[nkept++] = p;
    t->io++;
    t->ib += size;
}

/* One block of the round: allocated, maybe reallocated, freed or kept.
 * calloc is called through its address, which the program reads from its
 * GOT (a GLOB_DAT relocation, on a page the loader made read-only):
 * malloc and realloc through the PLT (JUMP_SLOT, lazily bound). */
__attribute__((noinline)) static void one_block(int i, struct heap_truth *t)
{
    void *(*volatile zeroed)(size_t, size_t) = calloc;
    long size = 100 + (i % 10) * 50;
    char *p = i % 5 == 0 ? zeroed(1, (size_t)size) : malloc((size_t)size);
    t->ao++;
    t->ab += size;
    p[0] = 1;
    if (i % 4 == 1) {
        p = realloc(p, (size_t)size + 64);
        size += 64;
        t->ao++;
        t->ab += size;
    }
    if (i % 3 == 2)
        free(p);
    else
        keep(p, size, t);
}

__attribute__((noinline)) static void alloc_after_attach(struct heap_truth *t)
{
    for (int i = 0; i < WORK_BLOCKS; i++)
        one_block(i, t);
    /* Blocks the agent never saw: freed, or grown into new ones. */
    if (!pre_blocks[0])
        return;
    for (int j = 0; j < PRE_BLOCKS; j++) {
        if (j < PRE_REALLOCS) {
            keep(realloc(pre_blocks[j], 300), 300, t);
            t->ao++;
            t->ab += 300;
        } else {
            free(pre_blocks[j]);
        }
        pre_blocks[j] = NULL;
    }
}

static void pre_allocate(void)
{
    for (int j = 0; j < PRE_BLOCKS; j++)
        pre_blocks[j] = malloc(200);
}

/* ---- the contended mutex ---------------------------------------------- */

static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static int hold_pipe[2];
/* The round the holder holds, the round the worker took. */
static int hold_round, take_round;

static void nap_ms(long ms)
{
    sleep_us(ms * 1000);
}

__attribute__((noinline)) static void holder_work(int r)
{
    pthread_mutex_lock(&hot);
    __atomic_store_n(&hold_round, r, __ATOMIC_SEQ_CST);
    nap_ms(20);
    pthread_mutex_unlock(&hot);
}

static void *holder(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "holder");
    char c;
    while (read(hold_pipe[0], &c, 1) == 1) {
        for (int r = 1; r <= HOLDS; r++) {
            holder_work(r);
            while (__atomic_load_n(&take_round, __ATOMIC_SEQ_CST) != r)
                nap_ms(1);
        }
    }
    return NULL;
}

/* The worker's waits for the holder, measured by itself. */
__attribute__((noinline)) static long wait_for_holder(void)
{
    long waited = 0;
    __atomic_store_n(&hold_round, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&take_round, 0, __ATOMIC_SEQ_CST);
    if (write(hold_pipe[1], "x", 1) != 1)
        return -1;
    for (int r = 1; r <= HOLDS; r++) {
        while (__atomic_load_n(&hold_round, __ATOMIC_SEQ_CST) != r)
            sched_yield();
        long t0 = now_ns();
        pthread_mutex_lock(&hot);
        waited += now_ns() - t0;
        pthread_mutex_unlock(&hot);
        __atomic_store_n(&take_round, r, __ATOMIC_SEQ_CST);
    }
    return waited;
}

/* ---- the worker ---------------------------------------------------------- */

static void work_once(void)
{
    struct heap_truth t = {0, 0, 0, 0};
    work_round++;
    alloc_after_attach(&t);
    printf("heap round=%d alloc_after_attach %ld %ld %ld %ld\n", work_round,
           t.io, t.ib, t.ao, t.ab);
    fflush(stdout);
    printf("mutex round=%d wait_ns=%ld\n", work_round, wait_for_holder());
    fflush(stdout);
}

static void free_kept(void)
{
    int n = nkept;
    for (int i = 0; i < n; i++)
        free(kept[i]);
    nkept = 0;
    printf("freed round=%d blocks=%d\n", work_round, n);
    fflush(stdout);
}

static void *worker(void *arg)
{
    sigset_t *set = arg;
    prctl(PR_SET_NAME, "worker");
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0)
            continue;
        if (sig == SIGUSR1)
            work_once();
        else
            free_kept();
    }
    return NULL;
}

/* In main, before any other thread: SIGUSR1 and SIGUSR2 blocked (the
 * threads created next inherit it), the blocks of before the attach, the
 * worker and the holder. */
static int work_start(void)
{
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 || pipe(hold_pipe) != 0)
        return -1;
    pre_allocate();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, &set) != 0 ||
        pthread_create(&t, NULL, holder, NULL) != 0)
        return -1;
    return 0;
}

#endif
