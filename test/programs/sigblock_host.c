/*
 * Hosts that block signals and read them synchronously (signalfd,
 * sigtimedwait), as event-loop daemons do. They expect to read only the
 * signals they are sent: the agent's profiling and thread-dump signals must
 * never reach them.
 *
 *   sigblock_host MODE READER [LATE_MS]
 *
 * READER is "signalfd" or "sigwait" (sigtimedwait with a zero timeout).
 * Every reader burns CPU in short chunks and reads its pending signals
 * after each: SIGUSR1 or SIGTERM ends the program (exit 0, "signals ok");
 * any other signal prints "unexpected signal N in THREAD" and exits 2.
 * Without an ending signal within 60 s it exits 3.
 *
 * MODE:
 *   single   the main thread blocks every signal (after LATE_MS of burning
 *            in early_burn with nothing blocked, default 0, counted from
 *            a CPU profile's start) and reads them,
 *            burning in blocked_burn.
 *   threads  the main thread blocks every signal at once and reads them,
 *            burning in blocked_burn; it starts "free", which unblocks the
 *            profiling signal (SIGPROF) and alternates 300 ms in free_burn
 *            with 100 ms in pause_burn with SIGPROF blocked again (reading
 *            its own pending signals there); and every 200 ms a short
 *            thread that inherits the blocked mask (exits 2 if it finds
 *            SIGPROF or SIGUSR1 unblocked), burns 50 ms in child_burn and
 *            reads its own signals. "free" prints
 *            "free_cpu_ns=N" (its thread CPU time spent in free_burn so
 *            far) every 50 ms, with the wall-clock time:
 *            "free_cpu_ns=N at=SECONDS.NANOSECONDS".
 *   reader   the main thread blocks every signal and waits for "reader",
 *            which blocks only SIGUSR1 and SIGTERM and waits in a blocking
 *            read of a signalfd for every signal (such a read returns a
 *            signal even when it is not blocked). READER must be
 *            "signalfd".
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "profiling_began.h"
#include "timing.h"

static volatile unsigned long sink;
static volatile int ending;
static int use_signalfd;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void spin(long n)
{
    unsigned long x = sink;
    for (long i = 0; i < n; i++)
        x = x * 2862933555777941757ULL + 3037000493ULL;
    sink = x;
}

__attribute__((noinline)) void early_burn(void) { spin(200000); }
__attribute__((noinline)) void blocked_burn(void) { spin(200000); }
__attribute__((noinline)) void free_burn(void) { spin(200000); }
__attribute__((noinline)) void pause_burn(void) { spin(200000); }
__attribute__((noinline)) void child_burn(void) { spin(200000); }

/* A reader of the calling thread's pending signals in `set`. */
struct reader {
    int fd; /* signalfd, or -1 */
    sigset_t set;
    const char *who;
};

static void reader_open(struct reader *r, const sigset_t *set, const char *who)
{
    r->set = *set;
    r->who = who;
    r->fd = -1;
    if (use_signalfd) {
        r->fd = signalfd(-1, set, SFD_NONBLOCK | SFD_CLOEXEC);
        if (r->fd < 0) {
            perror("signalfd");
            exit(4);
        }
    }
}

/* Reads every pending signal; returns 1 when told to end. */
static int reader_poll(struct reader *r)
{
    for (;;) {
        int sig;
        if (r->fd >= 0) {
            struct signalfd_siginfo si;
            ssize_t n = read(r->fd, &si, sizeof si);
            if (n != (ssize_t)sizeof si)
                return ending;
            sig = (int)si.ssi_signo;
        } else {
            struct timespec zero = {0, 0};
            sig = sigtimedwait(&r->set, NULL, &zero);
            if (sig < 0)
                return ending;
        }
        if (sig == SIGUSR1 || sig == SIGTERM) {
            ending = 1;
            return 1;
        }
        printf("unexpected signal %d in %s\n", sig, r->who);
        fflush(stdout);
        _exit(2);
    }
}

static void reader_close(struct reader *r)
{
    if (r->fd >= 0)
        close(r->fd);
}

static void block_all(void)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
}

static void *child_thread(void *arg)
{
    (void)arg;
    sigset_t all, cur;
    sigfillset(&all);
    /* The mask it inherited must be the one it runs with. */
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    if (!sigismember(&cur, SIGPROF) || !sigismember(&cur, SIGUSR1)) {
        printf("a child thread's inherited mask was changed\n");
        fflush(stdout);
        _exit(2);
    }
    struct reader r;
    reader_open(&r, &all, "a child thread");
    double end = mono() + 0.05;
    while (mono() < end && !reader_poll(&r))
        child_burn();
    reader_poll(&r);
    reader_close(&r);
    return NULL;
}

static void *free_thread(void *arg)
{
    (void)arg;
    sigset_t prof;
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    struct reader r;
    reader_open(&r, &prof, "the free thread, SIGPROF blocked");
    long long free_ns = 0;
    double next_print = 0;
    while (!ending) {
        pthread_sigmask(SIG_UNBLOCK, &prof, NULL);
        double end = mono() + 0.3;
        while (mono() < end && !ending) {
            long long t0 = thread_cpu_ns();
            free_burn();
            free_ns += thread_cpu_ns() - t0;
            if (mono() >= next_print) {
                struct timespec wall;
                clock_gettime(CLOCK_REALTIME, &wall);
                printf("free_cpu_ns=%lld at=%lld.%09ld\n", free_ns,
                       (long long)wall.tv_sec, wall.tv_nsec);
                fflush(stdout);
                next_print = mono() + 0.05;
            }
        }
        pthread_sigmask(SIG_BLOCK, &prof, NULL);
        end = mono() + 0.1;
        while (mono() < end && !ending) {
            pause_burn();
            reader_poll(&r);
        }
    }
    reader_close(&r);
    return NULL;
}

static void *reader_thread(void *arg)
{
    (void)arg;
    sigset_t ends, all;
    sigemptyset(&ends);
    sigaddset(&ends, SIGUSR1);
    sigaddset(&ends, SIGTERM);
    pthread_sigmask(SIG_SETMASK, &ends, NULL);
    sigfillset(&all);
    int fd = signalfd(-1, &all, SFD_CLOEXEC);
    if (fd < 0) {
        perror("signalfd");
        exit(4);
    }
    printf("reading\n");
    fflush(stdout);
    for (;;) {
        struct signalfd_siginfo si;
        if (read(fd, &si, sizeof si) != (ssize_t)sizeof si)
            continue;
        if (si.ssi_signo == SIGUSR1 || si.ssi_signo == SIGTERM)
            break;
        printf("unexpected signal %u in the reader\n", si.ssi_signo);
        fflush(stdout);
        _exit(2);
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: sigblock_host single|threads signalfd|sigwait "
                        "[LATE_MS]\n");
        return 4;
    }
    int threads = strcmp(argv[1], "threads") == 0;
    use_signalfd = strcmp(argv[2], "signalfd") == 0;
    double late = argc > 3 ? atof(argv[3]) / 1000.0 : 0;
    if (strcmp(argv[1], "reader") == 0) {
        block_all();
        pthread_t t;
        if (pthread_create(&t, NULL, reader_thread, NULL) != 0)
            return 4;
        pthread_join(t, NULL);
        printf("signals ok\n");
        return 0;
    }
    /* The early part is counted from the profile's start, however late
     * the agent served. */
    if (late > 0)
        wait_profiling(60000);
    double start = mono();
    while (mono() < start + late)
        early_burn();

    block_all();
    sigset_t all;
    sigfillset(&all);
    struct reader r;
    reader_open(&r, &all, "the main thread");
    printf("blocked\n");
    fflush(stdout);

    pthread_t free_t;
    if (threads && pthread_create(&free_t, NULL, free_thread, NULL) != 0)
        return 4;
    double next_child = mono();
    double deadline = mono() + 60;
    while (!reader_poll(&r)) {
        if (mono() > deadline) {
            printf("no ending signal\n");
            return 3;
        }
        blocked_burn();
        if (threads && mono() >= next_child) {
            pthread_t c;
            if (pthread_create(&c, NULL, child_thread, NULL) == 0)
                pthread_detach(c);
            next_child = mono() + 0.2;
        }
    }
    if (threads)
        pthread_join(free_t, NULL);
    reader_close(&r);
    printf("signals ok\n");
    return 0;
}
