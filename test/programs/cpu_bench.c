/*
 * CPU benchmark host: THREADS threads each run ITERATIONS rounds of a
 * fixed CPU-bound loop; prints the process CPU time and the wall time of
 * the work alone: "cpu_ms=N wall_ms=N". With WAIT=1 it waits for SIGUSR1
 * before working (so a profile can be started first).
 *
 *   cpu_bench THREADS ITERATIONS WAIT
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static long iterations;
static volatile sig_atomic_t go;

__attribute__((noinline)) static void bench_step(void)
{
    unsigned long x = sink;
    for (int i = 0; i < 100000; i++)
        x = x * 2862933555777941757ULL + 3037000493ULL;
    sink = x;
}

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < iterations; i++)
        bench_step();
    return NULL;
}

static double cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_usr1(int sig)
{
    (void)sig;
    go = 1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    iterations = argc > 2 ? atol(argv[2]) : 10000;
    if (argc > 3 && atoi(argv[3])) {
        signal(SIGUSR1, on_usr1);
        printf("ready\n");
        fflush(stdout);
        while (!go)
            usleep(1000);
    }
    pthread_t t[64];
    if (n > 64)
        n = 64;
    double c0 = cpu_ms(), w0 = wall_ms();
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("cpu_ms=%.1f wall_ms=%.1f\n", cpu_ms() - c0, wall_ms() - w0);
    fflush(stdout);
    return 0;
}
