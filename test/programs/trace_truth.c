/*
 * A known timeline for the execution trace's truth test
 * (test/integration/trace_truth.sh), every wait measured by the program
 * around its own call:
 *   holder      holds `lock` 30 ms in every 60 ms;
 *   lockwaiter  waits for it in lock_waiter (pthread_mutex_lock);
 *   pipereader  read()s a pipe in pipe_reader, fed a byte every 40 ms;
 *   sockreader  recv()s a socket in sock_reader, fed every 25 ms;
 *   sleeper     sleeps 20 ms at a time in sleeper;
 *   burner      burns CPU in burn_cpu.
 * Prints "thread NAME TID" for each thread and "ready"; on SIGUSR1 prints
 * every wait so far as "wait KIND T0 T1" (CLOCK_MONOTONIC ns) and "done",
 * and goes on.
 */
#include "test/programs/timing.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WAITS_MAX 8192

struct log {
    const char *kind;
    long t0[WAITS_MAX], t1[WAITS_MAX];
    int n;
};

static struct log lock_log = {"lock"}, pipe_log = {"pipe"},
                  sock_log = {"sock"}, sleep_log = {"sleep"};
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int pipe_fd[2], sock_fd[2];
static volatile sig_atomic_t dump;
static int started;

static void logged(struct log *l, long t0, long t1)
{
    int n = l->n;
    if (n >= WAITS_MAX)
        return;
    l->t0[n] = t0;
    l->t1[n] = t1;
    __atomic_store_n(&l->n, n + 1, __ATOMIC_RELEASE);
}

static void named(const char *name)
{
    pthread_setname_np(pthread_self(), name);
    printf("thread %s %ld\n", name, (long)syscall(SYS_gettid));
    fflush(stdout);
    __atomic_add_fetch(&started, 1, __ATOMIC_RELEASE);
}

static void *holder(void *arg)
{
    (void)arg;
    named("holder");
    for (;;) {
        pthread_mutex_lock(&lock);
        sleep_us(30000);
        pthread_mutex_unlock(&lock);
        sleep_us(30000);
    }
    return NULL;
}

static void *lock_waiter(void *arg)
{
    (void)arg;
    named("lockwaiter");
    for (;;) {
        sleep_us(5000);
        long t0 = now_ns();
        pthread_mutex_lock(&lock);
        logged(&lock_log, t0, now_ns());
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static void *pipe_reader(void *arg)
{
    (void)arg;
    named("pipereader");
    for (;;) {
        char c;
        long t0 = now_ns();
        if (read(pipe_fd[0], &c, 1) != 1)
            abort();
        logged(&pipe_log, t0, now_ns());
    }
    return NULL;
}

static void *pipe_feeder(void *arg)
{
    (void)arg;
    named("pipefeeder");
    for (;;) {
        sleep_us(40000);
        if (write(pipe_fd[1], "p", 1) != 1)
            abort();
    }
    return NULL;
}

static void *sock_reader(void *arg)
{
    (void)arg;
    named("sockreader");
    for (;;) {
        char c;
        long t0 = now_ns();
        if (recv(sock_fd[0], &c, 1, 0) != 1)
            abort();
        logged(&sock_log, t0, now_ns());
    }
    return NULL;
}

static void *sock_feeder(void *arg)
{
    (void)arg;
    named("sockfeeder");
    for (;;) {
        sleep_us(25000);
        if (send(sock_fd[1], "s", 1, 0) != 1)
            abort();
    }
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    named("sleeper");
    for (;;) {
        long t0 = now_ns();
        sleep_us(20000);
        logged(&sleep_log, t0, now_ns());
    }
    return NULL;
}

static volatile unsigned long burnt;

static void burn_cpu(void)
{
    for (int i = 0; i < 1000000; i++)
        burnt++;
}

static void *burner(void *arg)
{
    (void)arg;
    named("burner");
    for (;;)
        burn_cpu();
    return NULL;
}

static void on_usr1(int sig)
{
    (void)sig;
    dump = 1;
}

static void print_log(struct log *l)
{
    int n = __atomic_load_n(&l->n, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        printf("wait %s %ld %ld\n", l->kind, l->t0[i], l->t1[i]);
}

int main(void)
{
    void *(*fns[])(void *) = {holder,      lock_waiter, pipe_reader,
                              pipe_feeder, sock_reader, sock_feeder,
                              sleeper,     burner};
    int nfns = sizeof fns / sizeof fns[0];
    signal(SIGUSR1, on_usr1);
    if (pipe(pipe_fd) || socketpair(AF_UNIX, SOCK_STREAM, 0, sock_fd))
        return 1;
    printf("thread trace_truth %ld\n", (long)getpid());
    for (int i = 0; i < nfns; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, fns[i], NULL))
            return 1;
    }
    while (__atomic_load_n(&started, __ATOMIC_ACQUIRE) < nfns)
        sleep_us(1000);
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        while (!dump)
            sleep_us(20000);
        dump = 0;
        print_log(&lock_log);
        print_log(&pipe_log);
        print_log(&sock_log);
        print_log(&sleep_log);
        printf("done\n");
        fflush(stdout);
    }
}
