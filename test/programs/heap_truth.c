/*
 * Test host for the heap profile: a known allocation pattern whose true
 * in-use and allocated counts per site are printed, so that a profile read
 * under the agent can be compared with them.
 *
 *   heap_truth SMALL_COUNT
 *
 * Sites (each its own function, so each is a leaf in the profile):
 *   live_1000       100663 x malloc(1000), kept (96 MiB)
 *   live_64k        512 x malloc(65536), kept (32 MiB)
 *   live_small      SMALL_COUNT x malloc(32), kept
 *   churn           50000 x malloc(16..4111), freed at once
 *   cross_thread    20000 x malloc(2000); another thread frees half
 *   realloc_chain   1000 chains of realloc from 100 to 1600 bytes, kept
 *   zeroed          5000 x calloc(10, 500), kept
 *   align_memalign  1000 x memalign(64, 3000), kept
 *   align_posix     1000 x posix_memalign(4096, 5000), kept
 *   align_c11       1000 x aligned_alloc(256, 2048), kept
 *   align_valloc    100 x valloc(10000), kept
 *
 * Prints "expect SITE INUSE_OBJECTS INUSE_BYTES ALLOC_OBJECTS ALLOC_BYTES"
 * per site, then "ready", and waits to be killed.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_1000 100663
#define N_64K 512
#define N_CHURN 50000
#define N_CROSS 20000
#define N_CHAINS 1000
#define N_ZEROED 5000
#define N_ALIGN 1000
#define N_VALLOC 100

static void expect(const char *site, long inuse_objects, long inuse_bytes,
                   long alloc_objects, long alloc_bytes)
{
    printf("expect %s %ld %ld %ld %ld\n", site, inuse_objects, inuse_bytes,
           alloc_objects, alloc_bytes);
}

static void touch(void *p, size_t n)
{
    if (!p) {
        fprintf(stderr, "allocation failed\n");
        exit(1);
    }
    memset(p, 1, n < 64 ? n : 64);
}

static __attribute__((noinline)) void live_1000(void **keep)
{
    for (int i = 0; i < N_1000; i++) {
        keep[i] = malloc(1000);
        touch(keep[i], 1000);
    }
    expect("live_1000", N_1000, N_1000 * 1000L, N_1000, N_1000 * 1000L);
}

static __attribute__((noinline)) void live_64k(void **keep)
{
    for (int i = 0; i < N_64K; i++) {
        keep[i] = malloc(65536);
        touch(keep[i], 65536);
    }
    expect("live_64k", N_64K, N_64K * 65536L, N_64K, N_64K * 65536L);
}

static __attribute__((noinline)) void live_small(void **keep, long n)
{
    for (long i = 0; i < n; i++) {
        keep[i] = malloc(32);
        touch(keep[i], 32);
    }
    expect("live_small", n, n * 32, n, n * 32);
}

static __attribute__((noinline)) void churn(void)
{
    unsigned x = 12345;
    long bytes = 0;
    for (int i = 0; i < N_CHURN; i++) {
        x = x * 1103515245u + 12345u;
        size_t n = 16 + (x >> 8) % 4096;
        void *p = malloc(n);
        touch(p, n);
        free(p);
        bytes += (long)n;
    }
    expect("churn", 0, 0, N_CHURN, bytes);
}

static void *free_half(void *arg)
{
    void **v = arg;
    for (int i = 0; i < N_CROSS; i += 2)
        free(v[i]);
    return NULL;
}

static __attribute__((noinline)) void cross_thread(void **keep)
{
    for (int i = 0; i < N_CROSS; i++) {
        keep[i] = malloc(2000);
        touch(keep[i], 2000);
    }
    pthread_t t;
    pthread_create(&t, NULL, free_half, keep);
    pthread_join(t, NULL);
    expect("cross_thread", N_CROSS / 2, N_CROSS / 2 * 2000L, N_CROSS,
           N_CROSS * 2000L);
}

static __attribute__((noinline)) void realloc_chain(void **keep)
{
    long steps = 0, bytes = 0;
    for (int c = 0; c < N_CHAINS; c++) {
        void *p = NULL;
        for (size_t n = 100; n <= 1600; n += 100) {
            p = realloc(p, n);
            touch(p, n);
            steps++;
            bytes += (long)n;
        }
        keep[c] = p;
    }
    expect("realloc_chain", N_CHAINS, N_CHAINS * 1600L, steps, bytes);
}

static __attribute__((noinline)) void zeroed(void **keep)
{
    for (int i = 0; i < N_ZEROED; i++) {
        keep[i] = calloc(10, 500);
        touch(keep[i], 5000);
    }
    expect("zeroed", N_ZEROED, N_ZEROED * 5000L, N_ZEROED, N_ZEROED * 5000L);
}

static __attribute__((noinline)) void align_memalign(void **keep)
{
    for (int i = 0; i < N_ALIGN; i++) {
        keep[i] = memalign(64, 3000);
        touch(keep[i], 3000);
    }
    expect("align_memalign", N_ALIGN, N_ALIGN * 3000L, N_ALIGN,
           N_ALIGN * 3000L);
}

static __attribute__((noinline)) void align_posix(void **keep)
{
    for (int i = 0; i < N_ALIGN; i++) {
        if (posix_memalign(&keep[i], 4096, 5000) != 0)
            keep[i] = NULL;
        touch(keep[i], 5000);
    }
    expect("align_posix", N_ALIGN, N_ALIGN * 5000L, N_ALIGN, N_ALIGN * 5000L);
}

static __attribute__((noinline)) void align_c11(void **keep)
{
    for (int i = 0; i < N_ALIGN; i++) {
        keep[i] = aligned_alloc(256, 2048);
        touch(keep[i], 2048);
    }
    expect("align_c11", N_ALIGN, N_ALIGN * 2048L, N_ALIGN, N_ALIGN * 2048L);
}

static __attribute__((noinline)) void align_valloc(void **keep)
{
    for (int i = 0; i < N_VALLOC; i++) {
        keep[i] = valloc(10000);
        touch(keep[i], 10000);
    }
    expect("align_valloc", N_VALLOC, N_VALLOC * 10000L, N_VALLOC,
           N_VALLOC * 10000L);
}

/* Pointer arrays come from mmap-backed static storage, not malloc, so the
 * only allocations of each site are the ones it reports. */
static void *keep_1000[N_1000], *keep_64k[N_64K], *keep_cross[N_CROSS];
static void *keep_chain[N_CHAINS], *keep_zeroed[N_ZEROED];
static void *keep_align[4][N_ALIGN];

int main(int argc, char **argv)
{
    long small = argc > 1 ? atol(argv[1]) : 100000;
    void **keep_small = calloc((size_t)small + 1, sizeof(void *));
    live_1000(keep_1000);
    live_64k(keep_64k);
    live_small(keep_small, small);
    churn();
    cross_thread(keep_cross);
    realloc_chain(keep_chain);
    zeroed(keep_zeroed);
    align_memalign(keep_align[0]);
    align_posix(keep_align[1]);
    align_c11(keep_align[2]);
    align_valloc(keep_align[3]);
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
