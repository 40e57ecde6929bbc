/*
 * Benchmark host for the lock interposers (test/bench/contention.sh).
 *
 *   contention_bench uncontended N
 *       one thread (plus an idle one), N pthread_mutex_lock/unlock pairs
 *       on a free mutex;
 *       prints "ns_per_pair=X" (CPU time of the loop / N)
 *   contention_bench uncontended_single N
 *       the same with no other host thread: glibc's single-thread fast
 *       path, as long as the agent's own threads have not started
 *   contention_bench uncontended_followed N
 *       the same while another thread blocks on another mutex (under
 *       PPROF_MUTEX_FRACTION=1 the agent follows that waiter, so every
 *       unlock knows that somebody somewhere waits)
 *   contention_bench contended THREADS N
 *       THREADS threads each do N rounds of: lock, about 1 us of work,
 *       unlock, about 1 us of work; prints "wall_ms=X cpu_ms=Y"
 *   contention_bench futex_wake N
 *       N syscall(SYS_futex, FUTEX_WAKE) on a word nobody waits on (what
 *       a futex lock's unlock costs when it finds waiters that are gone);
 *       prints "ns_per_call=X"
 *   contention_bench futex_wake_parked N
 *       the same while another thread sleeps in a futex wait on another
 *       word (under PPROF_MUTEX_FRACTION=1 the agent follows it, and each
 *       wake looks for waiters of its own address)
 *   contention_bench syscall N
 *       N syscall(SYS_getppid): any other number, forwarded at once;
 *       prints "ns_per_call=X"
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long sink;
static long rounds;

static double clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void pause_forever(void)
{
    struct timespec ts = {3600, 0};
    nanosleep(&ts, NULL);
}

static __attribute__((noinline)) void spin_work(int n)
{
    unsigned long x = sink;
    for (int i = 0; i < n; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
}

static __attribute__((noinline)) void uncontended_loop(long n)
{
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&mu);
        pthread_mutex_unlock(&mu);
    }
}

static int word;

static __attribute__((noinline)) void futex_wake_loop(long n)
{
    for (long i = 0; i < n; i++)
        syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static int parked_word;

static void *parked_thread(void *arg)
{
    (void)arg;
    for (;;)
        syscall(SYS_futex, &parked_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL,
                0);
    return NULL;
}

static __attribute__((noinline)) void syscall_loop(long n)
{
    for (long i = 0; i < n; i++)
        syscall(SYS_getppid);
}

static void *idle_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause_forever();
    return NULL;
}

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;

static void *blocked_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&held); /* main holds it until exit */
    return NULL;
}

static void *contender(void *arg)
{
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        pthread_mutex_lock(&mu);
        spin_work(300);
        pthread_mutex_unlock(&mu);
        spin_work(300);
    }
    return NULL;
}

/* CPU time (ns) of this thread per round of loop(n), after a warm-up of
 * n / 10 rounds. */
static double ns_per_round(void (*loop)(long), long n)
{
    loop(n / 10);
    double t0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    loop(n);
    double t1 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
    return (t1 - t0) * 1e6 / (double)n;
}

/* Starts a thread running fn and gives it 20 ms to get where it waits. */
static void start_settled(void *(*fn)(void *))
{
    pthread_t t;
    pthread_create(&t, NULL, fn, NULL);
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strncmp(argv[1], "uncontended", 11) == 0) {
        long n = atol(argv[2]);
        if (strcmp(argv[1], "uncontended_single") == 0) {
            printf("ns_per_pair=%.3f\n", ns_per_round(uncontended_loop, n));
            return 0;
        }
        if (strcmp(argv[1], "uncontended_followed") == 0) {
            pthread_mutex_lock(&held);
            start_settled(blocked_thread); /* it blocks on held */
        }
        /* Services are multi-threaded, and glibc drops the lock prefix of
         * its atomics while a process has one thread: without this idle
         * thread the agent's own server threads, not its hooks, would be
         * what the comparison measures. */
        pthread_t idle;
        pthread_create(&idle, NULL, idle_thread, NULL);
        printf("ns_per_pair=%.3f\n", ns_per_round(uncontended_loop, n));
        return 0;
    }
    if (argc >= 3 && (strncmp(argv[1], "futex_wake", 10) == 0 ||
                      strcmp(argv[1], "syscall") == 0)) {
        long n = atol(argv[2]);
        if (strcmp(argv[1], "futex_wake_parked") == 0) {
            start_settled(parked_thread); /* it parks */
        }
        void (*loop)(long) =
            argv[1][0] == 'f' ? futex_wake_loop : syscall_loop;
        pthread_t idle;
        pthread_create(&idle, NULL, idle_thread, NULL);
        printf("ns_per_call=%.3f\n", ns_per_round(loop, n));
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "contended") == 0) {
        int threads = atoi(argv[2]);
        rounds = atol(argv[3]);
        pthread_t t[64];
        if (threads < 1 || threads > 64)
            return 2;
        double w0 = clock_ms(CLOCK_MONOTONIC);
        double c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, contender, NULL);
        for (int i = 0; i < threads; i++)
            pthread_join(t[i], NULL);
        double w1 = clock_ms(CLOCK_MONOTONIC);
        double c1 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
        printf("wall_ms=%.3f cpu_ms=%.3f\n", w1 - w0, c1 - c0);
        return 0;
    }
    fprintf(stderr, "usage: contention_bench uncontended[_single|_followed] N | contended "
                    "THREADS N | futex_wake N | futex_wake_parked N | syscall N\n");
    return 2;
}
