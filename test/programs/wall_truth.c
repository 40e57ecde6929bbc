/*
 * Known shares of wall time, for the wall-clock profile's truth test.
 *   napper  loops: nap() sleeps 10 ms in nanosleep, work() spins 5 ms of
 *           wall time; it measures the wall time spent in each
 *   burner  burn() computes all the time, measuring its wall time
 * On SIGUSR1 (handled by the main thread only; the others block it) the
 * main thread prints "nap=NS work=NS burn=NS eintr=N", the totals so far.
 * nanosleep returning EINTR is counted (the profiler must never cause one).
 * Runs for argv[1] seconds (default 60).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long nap_ns, work_ns, burn_ns;
static int eintr;
static volatile sig_atomic_t report;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) static void nap(void)
{
    long long t0 = now_ns();
    struct timespec t = {0, 10000000};
    if (nanosleep(&t, NULL) != 0 && errno == EINTR)
        __atomic_fetch_add(&eintr, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&nap_ns, now_ns() - t0, __ATOMIC_RELAXED);
}

__attribute__((noinline)) static void work(void)
{
    long long t0 = now_ns(), t;
    volatile unsigned x = 1;
    do {
        for (int i = 0; i < 1000; i++)
            x = x * 1103515245u + 12345u;
        t = now_ns();
    } while (t - t0 < 5000000);
    __atomic_fetch_add(&work_ns, t - t0, __ATOMIC_RELAXED);
}

static void *napper(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "napper");
    for (;;) {
        nap();
        work();
    }
    return NULL;
}

__attribute__((noinline)) static void burn(void)
{
    volatile unsigned x = 1;
    for (;;) {
        long long t0 = now_ns();
        for (int i = 0; i < 100000; i++)
            x = x * 1103515245u + 12345u;
        __atomic_fetch_add(&burn_ns, now_ns() - t0, __ATOMIC_RELAXED);
    }
}

static void *burner(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "burner");
    burn();
    return NULL;
}

static void on_usr1(int sig)
{
    (void)sig;
    report = 1;
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 60;
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    pthread_t t;
    pthread_create(&t, NULL, napper, NULL);
    pthread_create(&t, NULL, burner, NULL);
    signal(SIGUSR1, on_usr1);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    printf("started\n");
    fflush(stdout);
    long long end = now_ns() + secs * 1000000000LL;
    while (now_ns() < end) {
        struct timespec nap20 = {0, 20000000};
        nanosleep(&nap20, NULL);
        if (report) {
            report = 0;
            printf("nap=%lld work=%lld burn=%lld eintr=%d\n",
                   __atomic_load_n(&nap_ns, __ATOMIC_RELAXED),
                   __atomic_load_n(&work_ns, __ATOMIC_RELAXED),
                   __atomic_load_n(&burn_ns, __ATOMIC_RELAXED),
                   __atomic_load_n(&eintr, __ATOMIC_RELAXED));
            fflush(stdout);
        }
    }
    return 0;
}
