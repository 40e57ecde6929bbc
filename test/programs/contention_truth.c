/*
 * Test host for the contention profiles: known waits, measured here.
 *
 * Phase 1 (mutex): one thread holds a mutex inside holder_work for 20 ms at
 * a time while two threads wait for it inside waiter_work; the waiters
 * measure their own time in pthread_mutex_lock and the total is printed as
 * "mutex_wait_ns=N". Phase 2: waits on a condition variable
 * (cond_waiter_work), a read lock held by a writer (rwlock_reader_work) and
 * a semaphore (sem_waiter_work), about 10 ms each, each measured here and
 * printed as "cond_wait_ns=N", "rwlock_wait_ns=N", "sem_wait_ns=N". Then
 * prints "done" and sleeps until killed, so the profiles can be read.
 *
 *   contention_truth ROUNDS
 */
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static volatile int held;
static volatile int finished;
static long total_wait_ns;


static __attribute__((noinline)) void holder_work(void)
{
    pthread_mutex_lock(&mu);
    held = 1;
    sleep_us(20000);
    held = 0;
    pthread_mutex_unlock(&mu);
}

static __attribute__((noinline)) void waiter_work(void)
{
    long t0 = now_ns();
    pthread_mutex_lock(&mu);
    long t1 = now_ns();
    pthread_mutex_unlock(&mu);
    __atomic_fetch_add(&total_wait_ns, t1 - t0, __ATOMIC_RELAXED);
}

static void *waiter(void *arg)
{
    (void)arg;
    while (!finished) {
        while (!held && !finished)
            usleep(200);
        if (finished)
            break;
        waiter_work();
        /* Let the holder take the lock again before waiting once more. */
        while (held && !finished)
            usleep(100);
        usleep(1000);
    }
    return NULL;
}

/* ---- phase 2 ------------------------------------------------------------ */

static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t cv_mu = PTHREAD_MUTEX_INITIALIZER;
static int cv_ready;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static sem_t sem;
static long cond_wait_ns, rwlock_wait_ns, sem_wait_ns;

/* The phase-2 thread says it is about to wait; the main thread then waits
 * until it sleeps (its state in /proc is S) before it lets it go, so that
 * every one of the ten waits is a wait however late the thread gets there
 * on a loaded machine (a post before the wait was no wait at all). */
static int waiter_tid;
static int arriving;

static void announce(void)
{
    __atomic_store_n(&arriving, 1, __ATOMIC_SEQ_CST);
}

static char task_state(int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

static void until_asleep(void)
{
    while (!__atomic_load_n(&arriving, __ATOMIC_SEQ_CST))
        sleep_us(200);
    while (task_state(__atomic_load_n(&waiter_tid, __ATOMIC_SEQ_CST)) != 'S')
        sleep_us(200);
    __atomic_store_n(&arriving, 0, __ATOMIC_SEQ_CST);
}

static __attribute__((noinline)) void cond_waiter_work(void)
{
    announce();
    pthread_mutex_lock(&cv_mu);
    while (!cv_ready) {
        long t0 = now_ns();
        pthread_cond_wait(&cv, &cv_mu);
        cond_wait_ns += now_ns() - t0;
    }
    cv_ready = 0;
    pthread_mutex_unlock(&cv_mu);
}

static __attribute__((noinline)) void rwlock_reader_work(void)
{
    long t0 = now_ns();
    pthread_rwlock_rdlock(&rw);
    rwlock_wait_ns += now_ns() - t0;
    pthread_rwlock_unlock(&rw);
}

static __attribute__((noinline)) void sem_waiter_work(void)
{
    announce();
    long t0 = now_ns();
    sem_wait(&sem);
    sem_wait_ns += now_ns() - t0;
}

static void *phase2_waiter(void *arg)
{
    int rounds = *(int *)arg;
    __atomic_store_n(&waiter_tid, (int)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
    for (int i = 0; i < rounds; i++) {
        cond_waiter_work();
        rwlock_reader_work();
        sem_waiter_work();
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 50;
    setvbuf(stdout, NULL, _IOLBF, 0);

    pthread_t w[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&w[i], NULL, waiter, NULL);
    for (int i = 0; i < rounds; i++) {
        holder_work();
        sleep_us(3000);
    }
    finished = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(w[i], NULL);
    printf("mutex_wait_ns=%ld\n", total_wait_ns);

    sem_init(&sem, 0, 0);
    int rounds2 = 10;
    pthread_t t;
    pthread_create(&t, NULL, phase2_waiter, &rounds2);
    for (int i = 0; i < rounds2; i++) {
        sleep_us(10000);
        /* Write-lock before waking the waiter, so that its read lock waits
         * however late it wakes. */
        pthread_rwlock_wrlock(&rw);
        until_asleep();
        pthread_mutex_lock(&cv_mu);
        cv_ready = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&cv_mu);
        sleep_us(10000);
        pthread_rwlock_unlock(&rw);
        sleep_us(10000);
        until_asleep();
        sem_post(&sem);
    }
    pthread_join(t, NULL);
    printf("cond_wait_ns=%ld\nrwlock_wait_ns=%ld\nsem_wait_ns=%ld\n",
           cond_wait_ns, rwlock_wait_ns, sem_wait_ns);
    printf("done\n");
    for (;;)
        pause();
}
