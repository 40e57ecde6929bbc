/*
 * Known shares of wall time, for the wall profile's truth test
 * (test/integration/wall_profile.sh). Four "cycler" threads loop through
 * four functions, each for a duration drawn at random (10 to 40 ms, so
 * that no tick rate can fall into step with them), and measure the wall time
 * spent in each, CLOCK_MONOTONIC around the call:
 *   compute     spins until its time is up (its wall time includes any
 *               time the thread waits for a CPU on a busy machine)
 *   nap         nanosleep
 *   wait_epoll  epoll_wait on its own pipe, which nobody writes (timeout)
 *   wait_lock   pthread_mutex_lock of a mutex the "holder" thread keeps
 *               for 15 ms at a time (in hold(), sleeping), 5 ms apart
 * Every EINTR one of these calls returns is counted (a profiler that never
 * sends a directed signal must cause none).
 *
 * On SIGUSR1 (handled by the main thread only; the others block it) the
 * main thread prints "compute=NS nap=NS epoll=NS lock=NS eintr=N", the
 * cyclers' totals so far. Runs for argv[1] seconds (default 120), or
 * until the file argv[2] exists.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

#define CYCLERS 4

enum { COMPUTE, NAP, EPOLL, LOCK, NFUNCS };
static long long spent[NFUNCS];
static long long compute_cpu; /* the cyclers' CPU time in compute, ns */
static int eintr;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void add(int f, long long t0)
{
    __atomic_fetch_add(&spent[f], now_ns() - t0, __ATOMIC_RELAXED);
}

static void saw(int rc)
{
    if (rc < 0 && errno == EINTR)
        __atomic_fetch_add(&eintr, 1, __ATOMIC_RELAXED);
}

/* 10 to 40 ms, from the thread's own generator. */
static long draw_ns(unsigned *seed)
{
    return 10000000 + (long)(rand_r(seed) % 30000001);
}

static long long thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) static void compute(long ns)
{
    long long c0 = thread_cpu_ns();
    long long t0 = now_ns();
    volatile unsigned x = 1;
    do {
        for (int i = 0; i < 200; i++)
            x = x * 1103515245u + 12345u;
    } while (now_ns() - t0 < ns);
    add(COMPUTE, t0);
    __atomic_fetch_add(&compute_cpu, thread_cpu_ns() - c0, __ATOMIC_RELAXED);
}

__attribute__((noinline)) static void nap(long ns)
{
    long long t0 = now_ns();
    struct timespec t = {0, ns};
    saw(nanosleep(&t, NULL));
    add(NAP, t0);
}

__attribute__((noinline)) static void wait_epoll(int ep, long ns)
{
    long long t0 = now_ns();
    struct epoll_event ev;
    saw(epoll_wait(ep, &ev, 1, (int)(ns / 1000000)));
    add(EPOLL, t0);
}

__attribute__((noinline)) static void wait_lock(void)
{
    long long t0 = now_ns();
    int rc = pthread_mutex_lock(&lock);
    add(LOCK, t0);
    if (rc == EINTR)
        __atomic_fetch_add(&eintr, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
}

static void *cycler(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 17u;
    pthread_setname_np(pthread_self(), "cycler");
    int fds[2];
    if (pipe(fds) != 0)
        abort();
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev);
    for (;;) {
        compute(draw_ns(&seed));
        nap(draw_ns(&seed));
        wait_epoll(ep, draw_ns(&seed));
        wait_lock();
    }
    return NULL;
}

__attribute__((noinline)) static void hold(void)
{
    struct timespec t = {0, 15000000};
    saw(nanosleep(&t, NULL));
}

static void *holder(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "holder");
    for (;;) {
        pthread_mutex_lock(&lock);
        hold();
        pthread_mutex_unlock(&lock);
        struct timespec t = {0, 5000000};
        saw(nanosleep(&t, NULL));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 120;
    const char *stop = argc > 2 ? argv[2] : NULL;
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    pthread_t t;
    pthread_create(&t, NULL, holder, NULL);
    for (long i = 0; i < CYCLERS; i++)
        pthread_create(&t, NULL, cycler, (void *)i);
    report_listen();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    printf("started\n");
    fflush(stdout);
    long long end = now_ns() + secs * 1000000000LL;
    while (now_ns() < end && !(stop && access(stop, F_OK) == 0)) {
        struct timespec t = {0, 20000000};
        nanosleep(&t, NULL);
        if (report_asked()) {
            printf("compute=%lld nap=%lld epoll=%lld lock=%lld eintr=%d "
                   "compute_cpu=%lld\n",
                   __atomic_load_n(&spent[COMPUTE], __ATOMIC_RELAXED),
                   __atomic_load_n(&spent[NAP], __ATOMIC_RELAXED),
                   __atomic_load_n(&spent[EPOLL], __ATOMIC_RELAXED),
                   __atomic_load_n(&spent[LOCK], __ATOMIC_RELAXED),
                   __atomic_load_n(&eintr, __ATOMIC_RELAXED),
                   __atomic_load_n(&compute_cpu, __ATOMIC_RELAXED));
            fflush(stdout);
        }
    }
    return 0;
}
