/*
 * Benchmark host for the heap profiler: a malloc-heavy multi-threaded
 * workload, or a plain loop of malloc+free pairs for instruction counts.
 *
 *   heap_bench work THREADS OPS   each thread: OPS allocations, sizes mostly
 *                                 small (16..256 B: 90%), some medium
 *                                 (1..8 KiB: 9.9%), a few large (64..256
 *                                 KiB: 0.1%), each written to, kept in a
 *                                 window of 4096 live objects (the oldest
 *                                 is freed)
 *   heap_bench pairs N            N x (malloc(64), write, free)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 4096

static long ops;

/* CPU time of the whole process (every thread, the joined ones too). */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static size_t pick_size(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    unsigned r = (unsigned)(*x % 1000);
    if (r < 900)
        return 16 + (size_t)(*x >> 20) % 241;
    if (r < 999)
        return 1024 + (size_t)(*x >> 20) % 7169;
    return 65536 + (size_t)(*x >> 20) % 196609;
}

static __attribute__((noinline)) void *alloc_one(size_t n)
{
    char *p = malloc(n);
    if (p)
        memset(p, (int)n, n < 128 ? n : 128);
    return p;
}

static void *worker(void *arg)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(uintptr_t)(arg ? arg : (void *)1);
    void **window = calloc(WINDOW, sizeof *window);
    unsigned long sum = 0;
    for (long i = 0; i < ops; i++) {
        size_t slot = (size_t)i % WINDOW;
        free(window[slot]);
        window[slot] = alloc_one(pick_size(&x));
        sum += (uintptr_t)window[slot] & 0xff;
    }
    for (size_t i = 0; i < WINDOW; i++)
        free(window[i]);
    free(window);
    return (void *)(uintptr_t)sum;
}

static __attribute__((noinline)) void pairs(long n)
{
    for (long i = 0; i < n; i++) {
        volatile char *p = malloc(64);
        p[0] = 1;
        free((void *)p);
    }
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "pairs") == 0) {
        pairs(atol(argv[2]));
        return 0;
    }
    if (argc < 4 || strcmp(argv[1], "work") != 0) {
        fprintf(stderr, "usage: heap_bench work THREADS OPS | pairs N\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    ops = atol(argv[3]);
    pthread_t t[64];
    if (threads < 1 || threads > 64)
        return 2;
    struct timespec t0, t1;
    double cpu0 = cpu_seconds();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double cpu1 = cpu_seconds();
    /* The workload's own wall time, to the microsecond: /usr/bin/time
     * rounds to 10 ms, a twentieth of a run here. Its CPU time too (the
     * threads' user and system time, start-up left out), which the other
     * work on a shared machine moves far less than the wall time. */
    printf("heap_bench_elapsed %.6f\n",
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    printf("heap_bench_cpu %.6f\n", cpu1 - cpu0);
    return 0;
}
