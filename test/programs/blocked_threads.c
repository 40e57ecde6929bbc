/*
 * Threads blocked in calls that a signal handler would cut short with
 * EINTR, each in its own named function, for the threads profile: it must
 * show every one of these functions without ever interrupting them.
 *   epoll-waiter  wait_in_epoll    epoll_wait on a pipe nobody writes
 *   poller        wait_in_poll     poll on such a pipe, 1 h timeout
 *   pipe-reader   wait_in_read     read on such a pipe
 *   sleeper       wait_in_sleep    nanosleep, 1 h
 *   timed-waiter  wait_in_timedwait pthread_cond_timedwait, 1 h
 * Every EINTR any of them sees is printed ("EINTR in NAME"). Runs for
 * argv[1] seconds (default 60), then prints "eintr: N" and exits.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static int eintr;
static int pipe_fds[2];

static void saw_eintr(const char *name)
{
    __atomic_fetch_add(&eintr, 1, __ATOMIC_SEQ_CST);
    printf("EINTR in %s\n", name);
    fflush(stdout);
}

__attribute__((noinline)) static void wait_in_epoll(void)
{
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, pipe_fds[0], &ev);
    for (;;)
        if (epoll_wait(ep, &ev, 1, -1) < 0 && errno == EINTR)
            saw_eintr("epoll_wait");
}

__attribute__((noinline)) static void wait_in_poll(void)
{
    struct pollfd p = {.fd = pipe_fds[0], .events = POLLIN};
    for (;;)
        if (poll(&p, 1, 3600 * 1000) < 0 && errno == EINTR)
            saw_eintr("poll");
}

__attribute__((noinline)) static void wait_in_read(void)
{
    char c;
    for (;;)
        if (read(pipe_fds[0], &c, 1) < 0 && errno == EINTR)
            saw_eintr("read");
}

__attribute__((noinline)) static void wait_in_sleep(void)
{
    for (;;) {
        struct timespec t = {3600, 0};
        if (nanosleep(&t, NULL) != 0 && errno == EINTR)
            saw_eintr("nanosleep");
    }
}

__attribute__((noinline)) static void wait_in_timedwait(void)
{
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    pthread_mutex_lock(&m);
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 3600;
        /* glibc restarts the futex wait itself on EINTR; an early return
         * other than a timeout would be the signal's doing. */
        int rc = pthread_cond_timedwait(&c, &m, &until);
        if (rc == EINTR)
            saw_eintr("pthread_cond_timedwait");
    }
}

struct job {
    const char *name;
    void (*fn)(void);
};

static void *run(void *arg)
{
    const struct job *j = arg;
    pthread_setname_np(pthread_self(), j->name);
    j->fn();
    return NULL;
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 60;
    static const struct job jobs[] = {
        {"epoll-waiter", wait_in_epoll},
        {"poller", wait_in_poll},
        {"pipe-reader", wait_in_read},
        {"sleeper", wait_in_sleep},
        {"timed-waiter", wait_in_timedwait},
    };
    /* Two signal sets in main's frame, mostly never written: stale return
     * addresses stay in them, which a walk of main (a frame-pointer frame
     * reached from /proc's stack pointer) must not take for frames. */
    sigset_t none, old;
    sigemptyset(&none);
    pthread_sigmask(SIG_BLOCK, &none, &old);
    if (pipe(pipe_fds) != 0)
        return 1;
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        pthread_t t;
        pthread_create(&t, NULL, run, (void *)&jobs[i]);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    printf("started\n");
    fflush(stdout);
    struct timespec end, now;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += secs;
    do {
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec < end.tv_sec);
    printf("eintr: %d\n", __atomic_load_n(&eintr, __ATOMIC_SEQ_CST));
    return 0;
}
