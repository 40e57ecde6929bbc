/*
 * A process that is not dumpable, for test/integration/undumpable_stacks.sh:
 * its /proc/self/task/TID/syscall files are then root's, as in a server
 * that gave up root. Each thread says what it does (its name, its tid and
 * the function it stays in, printed once all are in place):
 *   early    read() of a pipe nobody writes, entered before the drop
 *   cond     pthread_cond_wait that nobody signals, in wait_cond()
 *   reader   read() of a pipe nobody writes, in wait_read()
 *   epoller  epoll_wait on such a pipe, 200 ms at a time, in wait_epoll()
 *   locker   pthread_mutex_lock of a mutex main holds, in wait_lock()
 *   spinner  spins in spin_work()
 *   signals  sigwait for SIGUSR2, which nobody sends, in wait_signal()
 *   main     holds that mutex and naps (nanosleep, 100 ms) in nap()
 * argv[1]: "setuid" (root only: groups, gid and uid become 65534) or
 * "prctl" (prctl(PR_SET_DUMPABLE, 0)); argv[2]: seconds to run. Any call
 * that fails (EINTR included) is printed as "FAILED <what> <errno>": a
 * profiler must not make any of them return early.
 */
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cond_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static volatile unsigned long sink;
static int tids[8];
static sigset_t usr2;

static void failed(const char *what)
{
    printf("FAILED %s %d\n", what, errno);
    fflush(stdout);
}

static void named(const char *name, int slot)
{
    pthread_setname_np(pthread_self(), name);
    __atomic_store_n(&tids[slot], (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
}

static int quiet_pipe(void)
{
    int fds[2];
    if (pipe(fds) != 0) {
        failed("pipe");
        exit(1);
    }
    return fds[0]; /* the write end stays open, unwritten */
}

__attribute__((noinline)) void wait_early(int fd)
{
    char c;
    if (read(fd, &c, 1) != 1)
        failed("early read");
}

static void *early(void *arg)
{
    (void)arg;
    named("early", 0);
    wait_early(quiet_pipe());
    return NULL;
}

__attribute__((noinline)) void wait_cond(void)
{
    pthread_mutex_lock(&cond_lock);
    for (;;) {
        int r = pthread_cond_wait(&never, &cond_lock);
        if (r != 0) {
            errno = r;
            failed("pthread_cond_wait");
        }
    }
}

static void *cond(void *arg)
{
    (void)arg;
    named("cond", 1);
    wait_cond();
    return NULL;
}

__attribute__((noinline)) void wait_read(int fd)
{
    char c;
    if (read(fd, &c, 1) != 1)
        failed("read");
}

static void *reader(void *arg)
{
    (void)arg;
    named("reader", 2);
    wait_read(quiet_pipe());
    return NULL;
}

__attribute__((noinline)) void wait_epoll(int ep)
{
    struct epoll_event ev;
    if (epoll_wait(ep, &ev, 1, 200) != 0)
        failed("epoll_wait");
}

static void *epoller(void *arg)
{
    (void)arg;
    named("epoller", 3);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, quiet_pipe(), &ev) != 0)
        failed("epoll setup");
    for (;;)
        wait_epoll(ep);
    return NULL;
}

__attribute__((noinline)) void wait_lock(void)
{
    int r = pthread_mutex_lock(&held);
    errno = r;
    failed("pthread_mutex_lock returned");
}

static void *locker(void *arg)
{
    (void)arg;
    named("locker", 4);
    wait_lock();
    return NULL;
}

__attribute__((noinline)) void spin_work(void)
{
    for (;;)
        for (unsigned long i = 0; i < 1000000; i++)
            sink += i;
}

static void *spinner(void *arg)
{
    (void)arg;
    named("spinner", 5);
    spin_work();
    return NULL;
}

__attribute__((noinline)) void nap(void)
{
    struct timespec ts = {0, 100000000};
    if (nanosleep(&ts, NULL) != 0)
        failed("nanosleep");
}

__attribute__((noinline)) void wait_signal(void)
{
    int sig;
    int r = sigwait(&usr2, &sig);
    errno = r;
    failed("sigwait returned");
}

static void *signals(void *arg)
{
    (void)arg;
    named("signals", 7);
    wait_signal();
    return NULL;
}

static void start(void *(*fn)(void *))
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, NULL) != 0) {
        failed("pthread_create");
        exit(1);
    }
}

static void drop(const char *how)
{
    if (strcmp(how, "setuid") == 0) {
        if (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
            setresuid(65534, 65534, 65534) != 0) {
            failed("setuid");
            exit(1);
        }
    } else if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        failed("prctl");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "prctl";
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    int seconds = argc > 2 ? atoi(argv[2]) : 30;
    start(early);
    /* early is in its read before the drop (its state letter says so). */
    while (!__atomic_load_n(&tids[0], __ATOMIC_ACQUIRE))
        usleep(1000);
    for (;;) {
        char path[64], buf[256];
        snprintf(path, sizeof path, "/proc/self/task/%d/stat", tids[0]);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && p[2] == 'S')
            break;
        usleep(1000);
    }
    drop(how);
    pthread_mutex_lock(&held);
    start(cond);
    start(reader);
    start(epoller);
    start(locker);
    start(spinner);
    start(signals);
    named("main", 6);
    for (int i = 1; i < 8; i++)
        while (i != 6 && !__atomic_load_n(&tids[i], __ATOMIC_ACQUIRE))
            usleep(1000);
    usleep(200000); /* each in its place */
    printf("early=%d cond=%d reader=%d epoller=%d locker=%d spinner=%d "
           "main=%d signals=%d dumpable=%d\n",
           tids[0], tids[1], tids[2], tids[3], tids[4], tids[5], tids[6],
           tids[7],
           prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
    fflush(stdout);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        nap();
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < seconds);
    return 0;
}
