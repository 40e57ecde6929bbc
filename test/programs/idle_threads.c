/*
 * Many mostly idle threads, for the cost of the wall profile and of the
 * threads dump (test/bench/wall.sh): argv[1] threads (default 1000), each
 * waking every P to 3P ms of wall time (drawn per thread; P is argv[3],
 * default 100) to do about 20 us of work, and sleeping in between the way
 * thread pools do: a quarter in pthread_cond_timedwait, a quarter in
 * nanosleep, a quarter in epoll_wait on a pipe nobody writes, a quarter in
 * poll.
 *
 * Prints "ready" once every thread runs, then runs for argv[2] seconds
 * (default 10) and prints "cpu_ms=N wall_ms=N eintr=N": the process's CPU
 * time (user + system, every thread, the agent's included) over that run.
 * Every EINTR any waiting call returns is counted.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int pipe_fds[2];
static int eintr;
static volatile unsigned sink;

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void work(void)
{
    unsigned x = sink;
    for (int i = 0; i < 20000; i++)
        x = x * 1103515245u + 12345u;
    sink = x;
}

static void count_eintr(int rc)
{
    if (rc < 0 && errno == EINTR)
        __atomic_fetch_add(&eintr, 1, __ATOMIC_RELAXED);
}

__attribute__((noinline)) static void idle_cond(int ms)
{
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&m);
    int rc = pthread_cond_timedwait(&c, &m, &until);
    pthread_mutex_unlock(&m);
    if (rc == EINTR)
        __atomic_fetch_add(&eintr, 1, __ATOMIC_RELAXED);
}

__attribute__((noinline)) static void idle_sleep(int ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    count_eintr(nanosleep(&t, NULL));
}

__attribute__((noinline)) static void idle_epoll(int ep, int ms)
{
    struct epoll_event ev;
    count_eintr(epoll_wait(ep, &ev, 1, ms));
}

__attribute__((noinline)) static void idle_poll(int ms)
{
    struct pollfd p = {.fd = pipe_fds[0], .events = POLLIN};
    count_eintr(poll(&p, 1, ms));
}

static int started;
static int period_ms = 100;

static void *idler(void *arg)
{
    long i = (long)arg;
    int ms = period_ms + (int)((i * 7919) % (2 * period_ms + 1));
    int ep = -1;
    if (i % 4 == 2) {
        ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN};
        epoll_ctl(ep, EPOLL_CTL_ADD, pipe_fds[0], &ev);
    }
    __atomic_fetch_add(&started, 1, __ATOMIC_RELAXED);
    for (;;) {
        switch (i % 4) {
        case 0: idle_cond(ms); break;
        case 1: idle_sleep(ms); break;
        case 2: idle_epoll(ep, ms); break;
        default: idle_poll(ms); break;
        }
        work();
    }
    return NULL;
}

static long long cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int secs = argc > 2 ? atoi(argv[2]) : 10;
    if (argc > 3 && atoi(argv[3]) > 0)
        period_ms = atoi(argv[3]);
    if (pipe(pipe_fds) != 0)
        return 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, idler, (void *)i) != 0) {
            fprintf(stderr, "pthread_create failed at %ld\n", i);
            return 1;
        }
    }
    while (__atomic_load_n(&started, __ATOMIC_RELAXED) < n)
        usleep(1000);
    printf("ready\n");
    fflush(stdout);
    long long c0 = cpu_ns(), t0 = mono_ns();
    while (mono_ns() - t0 < secs * 1000000000LL)
        idle_sleep(50);
    long long c1 = cpu_ns(), t1 = mono_ns();
    printf("cpu_ms=%.1f wall_ms=%.1f eintr=%d\n", (c1 - c0) / 1e6,
           (t1 - t0) / 1e6, __atomic_load_n(&eintr, __ATOMIC_RELAXED));
    fflush(stdout);
    return 0;
}
