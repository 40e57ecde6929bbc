/* The rounds driver the contention truth programs share (C and C++).
 *
 * Round i: hold(i) announces the round with round_announce(i) and holds a
 * lock (or signals) for about 10 ms; the waiter thread starts its wait once
 * the round is announced, and the next round starts 3 ms after that wait is
 * over. The programs measure each wait themselves; the tests compare the
 * profile with those measurements.
 *
 * rounds_waiter names the waiting thread while a phase runs (0 between
 * phases), for programs that signal it. */
#ifndef ROUNDS_H
#define ROUNDS_H

#include <pthread.h>

#include "timing.h"

static int round_held, round_waited;
static pthread_t rounds_waiter;

static void round_announce(int round)
{
    __atomic_store_n(&round_held, round, __ATOMIC_SEQ_CST);
}

struct rounds_phase {
    int rounds;
    void (*hold)(int);
    void (*wait)(void);
};

static void *rounds_wait_loop(void *arg)
{
    struct rounds_phase *p = (struct rounds_phase *)arg;
    for (int i = 1; i <= p->rounds; i++) {
        while (__atomic_load_n(&round_held, __ATOMIC_SEQ_CST) < i)
            sleep_us(200);
        p->wait();
        __atomic_store_n(&round_waited, i, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static void run_rounds(int rounds, void (*hold)(int), void (*wait)(void))
{
    struct rounds_phase p = {rounds, hold, wait};
    round_held = round_waited = 0;
    pthread_t t;
    pthread_create(&t, NULL, rounds_wait_loop, &p);
    __atomic_store_n(&rounds_waiter, t, __ATOMIC_SEQ_CST);
    for (int i = 1; i <= rounds; i++) {
        hold(i);
        while (__atomic_load_n(&round_waited, __ATOMIC_SEQ_CST) < i)
            sleep_us(100);
        sleep_us(3000);
    }
    __atomic_store_n(&rounds_waiter, (pthread_t)0, __ATOMIC_SEQ_CST);
    pthread_join(t, NULL);
}

#endif
