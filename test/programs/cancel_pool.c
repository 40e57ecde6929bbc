/*
 * A host that cancels its threads, as worker pools do: the interposed
 * locks must not become cancellation points.
 *
 *   cancel_pool pool ROUNDS      ROUNDS times: 4 workers lock one mutex in
 *                                a loop (contended), push their cleanup
 *                                handler (which unlocks) only once they hold
 *                                it, and test for cancellation only after
 *                                unlocking; main cancels them all, joins
 *                                them, then must get the mutex within 5 s.
 *                                Prints "pool rounds=N cancelled=N locks=N"
 *                                and exits 0; exits 1 ("deadlock ...") when
 *                                a worker was cancelled inside
 *                                pthread_mutex_lock (the mutex is then held
 *                                by a thread that no longer exists).
 *   cancel_pool waits ROUNDS     ROUNDS times: a thread blocked in
 *                                pthread_cond_wait and one blocked in
 *                                sem_wait (real cancellation points) are
 *                                cancelled while a third contends for the
 *                                mutex; both must end as cancelled and the
 *                                condition's mutex be free again. Prints
 *                                "waits rounds=N" and exits 0.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 4

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static sem_t sem;
static volatile unsigned long sink;
static long locks[WORKERS];

static void deadline_in(struct timespec *ts, int secs)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += secs;
}

static void unlock_mu(void *m)
{
    pthread_mutex_unlock(m);
}

/* A short critical section without any cancellation point. */
static void critical(void)
{
    unsigned long x = sink;
    for (int i = 0; i < 200; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

static void *worker(void *arg)
{
    long *count = arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        pthread_cleanup_push(unlock_mu, &mu);
        critical();
        (*count)++;
        pthread_cleanup_pop(1);
        pthread_testcancel();
    }
    return NULL;
}

/* Joins t within secs seconds; 1 when it ended cancelled. Exits on a
 * timeout: the pool is deadlocked. */
static int join_within(pthread_t t, int secs, const char *what, int round)
{
    struct timespec ts;
    deadline_in(&ts, secs);
    void *ret = NULL;
    int err = pthread_timedjoin_np(t, &ret, &ts);
    if (err == ETIMEDOUT) {
        printf("deadlock round %d: %s did not end\n", round, what);
        fflush(stdout);
        _exit(1);
    }
    if (err) {
        printf("join: %s\n", strerror(err));
        _exit(1);
    }
    return ret == PTHREAD_CANCELED;
}

static void lock_within(int secs, int round)
{
    struct timespec ts;
    deadline_in(&ts, secs);
    int err = pthread_mutex_timedlock(&mu, &ts);
    if (err) {
        printf("deadlock round %d: main could not lock the mutex (%s)\n",
               round, strerror(err));
        fflush(stdout);
        _exit(1);
    }
    pthread_mutex_unlock(&mu);
}

static int pool(int rounds)
{
    long cancelled = 0, total = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_t t[WORKERS];
        for (int i = 0; i < WORKERS; i++) {
            locks[i] = 0;
            if (pthread_create(&t[i], NULL, worker, &locks[i]) != 0)
                return 1;
        }
        struct timespec nap = {0, 5 * 1000000};
        nanosleep(&nap, NULL);
        for (int i = 0; i < WORKERS; i++)
            pthread_cancel(t[i]);
        for (int i = 0; i < WORKERS; i++)
            cancelled += join_within(t[i], 5, "a worker", r);
        lock_within(5, r);
        for (int i = 0; i < WORKERS; i++)
            total += locks[i];
    }
    printf("pool rounds=%d cancelled=%ld locks=%ld\n", rounds, cancelled,
           total);
    return 0;
}

static void *cond_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    pthread_cleanup_push(unlock_mu, &mu);
    for (;;)
        pthread_cond_wait(&cv, &mu);
    pthread_cleanup_pop(1);
    return NULL;
}

static void *sem_waiter(void *arg)
{
    (void)arg;
    for (;;)
        sem_wait(&sem);
    return NULL;
}

static volatile int contend_stop;

static void *contender(void *arg)
{
    (void)arg;
    while (!contend_stop) {
        pthread_mutex_lock(&mu);
        critical();
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

static int waits(int rounds)
{
    sem_init(&sem, 0, 0);
    for (int r = 0; r < rounds; r++) {
        pthread_t c, s, k;
        contend_stop = 0;
        pthread_create(&k, NULL, contender, NULL);
        pthread_create(&c, NULL, cond_waiter, NULL);
        pthread_create(&s, NULL, sem_waiter, NULL);
        struct timespec nap = {0, 10 * 1000000};
        nanosleep(&nap, NULL);
        pthread_cancel(c);
        pthread_cancel(s);
        if (!join_within(c, 5, "the condition waiter", r) ||
            !join_within(s, 5, "the semaphore waiter", r)) {
            printf("round %d: a waiter was not cancelled\n", r);
            return 1;
        }
        contend_stop = 1;
        join_within(k, 5, "the contender", r);
        lock_within(5, r);
    }
    printf("waits rounds=%d\n", rounds);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: cancel_pool pool|waits ROUNDS\n");
        return 2;
    }
    int rounds = atoi(argv[2]);
    if (strcmp(argv[1], "pool") == 0)
        return pool(rounds);
    if (strcmp(argv[1], "waits") == 0)
        return waits(rounds);
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
