/*
 * Host for the flame graph, stats and charts tests: known functions in
 * every profile the pictures draw.
 *
 *   - thread "spinner": CPU in flame_cpu_outer -> flame_cpu_leaf<int>, a
 *     template whose demangled name needs XML escaping ('<', '>');
 *   - thread "grower": every 200 ms, flame_heap_grow keeps one more
 *     1 MiB block (touched, so RSS grows too), up to 48 MiB, then holds
 *     them: the heap in use climbs for about 10 s, then stays ("grown"
 *     on stdout);
 *   - main: sleeps.
 *
 *   flame_host SECONDS [quiet]     (quiet: no spinner, for the benchmark)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned long sink;
static void *blocks[48];

template <typename T> __attribute__((noinline)) T flame_cpu_leaf(long n)
{
    T x = (T)sink;
    for (long i = 0; i < n; i++)
        x = x * 31 + (T)i;
    sink = (unsigned long)x;
    return x;
}

__attribute__((noinline)) void flame_cpu_outer(long n)
{
    flame_cpu_leaf<int>(n);
}

static void *spinner(void *)
{
    pthread_setname_np(pthread_self(), "spinner");
    for (;;)
        flame_cpu_outer(1000000);
    return nullptr;
}

__attribute__((noinline)) void *flame_heap_grow(size_t size)
{
    void *p = malloc(size);
    if (p)
        memset(p, 0x5a, size);
    return p;
}

static void *grower(void *)
{
    pthread_setname_np(pthread_self(), "grower");
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        blocks[i] = flame_heap_grow(1 << 20);
        usleep(200000);
    }
    printf("grown\n");
    fflush(stdout);
    for (;;)
        pause();
    return nullptr;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 60;
    pthread_t a, b;
    if (argc <= 2 || strcmp(argv[2], "quiet") != 0)
        pthread_create(&a, nullptr, spinner, nullptr);
    pthread_create(&b, nullptr, grower, nullptr);
    printf("ready\n");
    fflush(stdout);
    sleep((unsigned)seconds);
    return 0;
}
