/*
 * Workloads for the execution trace's cost (test/bench/trace.sh):
 *   read N [wait]           N one-byte reads of /dev/zero in read_loop;
 *                           prints ns_per_call=X (the thread's CPU time)
 *                           and faults=X (the page faults it took);
 *                           with wait, once a trace records, and the
 *                           program then waits to be killed
 *   locks THREADS MS [wait] THREADS threads lock a shared mutex, do a
 *                           little work inside and outside, for MS ms;
 *                           prints ops_per_s=X traced=0|1. With wait, the
 *                           measurement starts once a trace records
 *                           (pprof_trace_enabled()), at most 20 s later,
 *                           and the program then waits to be killed.
 *   flood N                 once a trace records, N reads of /dev/zero
 *                           (more records than a small trace memory
 *                           holds); prints "flooded" and waits to be killed.
 */
#include "agent/pprofagent.h"
#include "test/programs/timing.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The page faults this thread took (its own count, not the process's). */
static long thread_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

static void read_loop(int fd, long n)
{
    char c;
    for (long i = 0; i < n; i++)
        if (read(fd, &c, 1) != 1)
            abort();
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static volatile int go_on = 1;
static volatile unsigned long shared;

static void spin(int n)
{
    for (volatile int i = 0; i < n; i++)
        ;
}

static void *locker(void *arg)
{
    long *ops = arg;
    while (go_on) {
        pthread_mutex_lock(&mu);
        shared++;
        spin(200);
        pthread_mutex_unlock(&mu);
        spin(600);
        (*ops)++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "read") == 0) {
        long n = atol(argv[2]);
        int fd = open("/dev/zero", O_RDONLY);
        if (argc > 3)
            for (int i = 0; i < 2000 && !pprof_trace_enabled(); i++)
                sleep_us(10000);
        read_loop(fd, n / 10); /* warm-up */
        long f0 = thread_faults();
        long long t0 = thread_cpu_ns();
        read_loop(fd, n);
        printf("ns_per_call=%.2f traced=%d faults=%ld\n",
               (double)(thread_cpu_ns() - t0) / (double)n,
               pprof_trace_enabled(), thread_faults() - f0);
        fflush(stdout);
        if (argc > 3)
            for (;;)
                pause();
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "flood") == 0) {
        int fd = open("/dev/zero", O_RDONLY);
        for (int i = 0; i < 2000 && !pprof_trace_enabled(); i++)
            sleep_us(10000);
        read_loop(fd, atol(argv[2]));
        printf("flooded\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    if (argc >= 4 && strcmp(argv[1], "locks") == 0) {
        int threads = atoi(argv[2]);
        long ms = atol(argv[3]);
        if (argc > 4)
            for (int i = 0; i < 2000 && !pprof_trace_enabled(); i++)
                sleep_us(10000);
        int traced = pprof_trace_enabled();
        pthread_t t[64];
        long ops[64] = {0};
        long start = now_ns();
        for (int i = 0; i < threads && i < 64; i++)
            pthread_create(&t[i], NULL, locker, &ops[i]);
        sleep_us(ms * 1000);
        go_on = 0;
        long total = 0;
        for (int i = 0; i < threads && i < 64; i++) {
            pthread_join(t[i], NULL);
            total += ops[i];
        }
        double secs = (double)(now_ns() - start) / 1e9;
        printf("ops_per_s=%.0f traced=%d\n", (double)total / secs,
               traced && pprof_trace_enabled());
        fflush(stdout);
        if (argc > 4) /* the trace is still being answered: wait for a kill */
            for (;;)
                pause();
        return 0;
    }
    fprintf(stderr, "usage: trace_bench read N | locks THREADS MS [wait]\n");
    return 2;
}
