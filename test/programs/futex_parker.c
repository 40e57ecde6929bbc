/*
 * A lock built as parking_lot, abseil and WebKit build theirs: waiters
 * queue and each sleeps on a futex word of its own, and the unlocker hands
 * the lock to the first one and wakes only that one's word. Measures how
 * the mutex profile attributes such a lock (docs/contention.md): one
 * thread holds it in holder_work for 20 ms per round while three threads
 * queue in waiter_work; prints the waiters' measured time as
 * "mutex_wait_ns=N", then "done", and waits for the file named by its
 * second argument.
 *
 *   futex_parker ROUNDS STOP_FILE
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

#define WAITERS 3

struct waiter {
    int parked;
    struct waiter *next;
};

static int queue_lock; /* a spinlock over the queue and `held` */
static int held;
static struct waiter *head, *tail;
static int round_held, queued, finished;
static long mutex_wait_ns;


static void spin(void)
{
    while (__atomic_exchange_n(&queue_lock, 1, __ATOMIC_ACQUIRE))
        ;
}

static void unspin(void)
{
    __atomic_store_n(&queue_lock, 0, __ATOMIC_RELEASE);
}

static void parker_lock(void)
{
    struct waiter me = {1, NULL};
    spin();
    if (!held) {
        held = 1;
        unspin();
        return;
    }
    if (tail)
        tail->next = &me;
    else
        head = &me;
    tail = &me;
    __atomic_fetch_add(&queued, 1, __ATOMIC_SEQ_CST);
    unspin();
    while (__atomic_load_n(&me.parked, __ATOMIC_ACQUIRE))
        syscall(SYS_futex, &me.parked, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
    /* Handed over: the lock is ours. */
}

static void parker_unlock(void)
{
    spin();
    struct waiter *w = head;
    if (!w) {
        held = 0;
        unspin();
        return;
    }
    head = w->next;
    if (!head)
        tail = NULL;
    __atomic_fetch_sub(&queued, 1, __ATOMIC_SEQ_CST);
    unspin();
    __atomic_store_n(&w->parked, 0, __ATOMIC_RELEASE);
    syscall(SYS_futex, &w->parked, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static __attribute__((noinline)) void holder_work(int round)
{
    parker_lock();
    __atomic_store_n(&round_held, round, __ATOMIC_SEQ_CST);
    /* Hold until every waiter queued, then 20 ms. */
    while (__atomic_load_n(&queued, __ATOMIC_SEQ_CST) < WAITERS)
        sleep_us(100);
    sleep_us(20000);
    parker_unlock();
    __atomic_store_n(&round_held, -round, __ATOMIC_SEQ_CST);
}

static __attribute__((noinline)) void waiter_work(void)
{
    long t0 = now_ns();
    parker_lock();
    __atomic_fetch_add(&mutex_wait_ns, now_ns() - t0, __ATOMIC_RELAXED);
    parker_unlock();
}

static void *waiter(void *arg)
{
    int rounds = *(int *)arg;
    for (int i = 1; i <= rounds; i++) {
        while (__atomic_load_n(&round_held, __ATOMIC_SEQ_CST) != i)
            sleep_us(100);
        waiter_work();
    }
    __atomic_fetch_add(&finished, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    const char *stop = argc > 2 ? argv[2] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_t t;
    for (int i = 0; i < WAITERS; i++)
        pthread_create(&t, NULL, waiter, &rounds);
    for (int i = 1; i <= rounds; i++) {
        holder_work(i);
        /* Every waiter passes through before the next round. */
        while (__atomic_load_n(&held, __ATOMIC_SEQ_CST) ||
               __atomic_load_n(&queued, __ATOMIC_SEQ_CST))
            sleep_us(100);
        sleep_us(3000);
    }
    while (__atomic_load_n(&finished, __ATOMIC_SEQ_CST) < WAITERS)
        sleep_us(1000);
    printf("mutex_wait_ns=%ld\ndone\n", mutex_wait_ns);
    while (stop[0] && access(stop, F_OK) != 0)
        sleep_us(20000);
    return 0;
}
