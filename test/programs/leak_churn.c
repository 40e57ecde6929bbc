/*
 * A leak among churn: leak_slowly() leaks LEAK bytes a second (1 KiB
 * blocks, never freed) while churn_small()/churn_large() allocate and free
 * CHURN MB a second at once and keep_recent() holds one block in four
 * for RECENT_MS each (young live memory, larger than the leak).
 *
 *   leak_churn LEAK_BYTES_PER_S CHURN_MB_PER_S SECONDS
 *
 * Prints "leaked T BYTES" each 100 ms (T: ms since start, by its own
 * clock), "recent BYTES" (the window's live bytes) and "done" at the end,
 * then idles.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LEAK_BLOCK 1024
#define RECENT_SLOTS (1 << 16)
#define RECENT_MS 500

static void *volatile sink;
/* A queue of recent blocks with the time each was made. */
static struct {
    void *p;
    int64_t t;
} recent[RECENT_SLOTS];
static size_t recent_head, recent_tail;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static __attribute__((noinline)) void leak_slowly(void)
{
    char *p = malloc(LEAK_BLOCK);
    memset(p, 1, LEAK_BLOCK);
    sink = p; /* never freed */
}

static __attribute__((noinline)) void churn_small(size_t n)
{
    char *p = malloc(n);
    p[0] = 1;
    sink = p;
    free(p);
}

static __attribute__((noinline)) void churn_large(size_t n)
{
    char *p = malloc(n);
    p[0] = 1;
    sink = p;
    free(p);
}

static __attribute__((noinline)) void keep_recent(size_t n, int64_t t)
{
    while (recent_head != recent_tail &&
           (recent[recent_head % RECENT_SLOTS].t < t - RECENT_MS ||
            recent_tail - recent_head == RECENT_SLOTS))
        free(recent[recent_head++ % RECENT_SLOTS].p);
    char *p = malloc(n);
    memset(p, 2, n);
    recent[recent_tail % RECENT_SLOTS].p = p;
    recent[recent_tail++ % RECENT_SLOTS].t = t;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    long leak_rate = atol(argv[1]);
    double churn_rate = atof(argv[2]) * 1e6;
    long seconds = atol(argv[3]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    int64_t start = now_ms(), last_print = -1000;
    long leaked = 0, churned = 0;
    uint64_t x = 88172645463325252ULL;
    for (;;) {
        int64_t t = now_ms() - start;
        if (t >= seconds * 1000)
            break;
        /* The leak keeps to its rate by its own clock. */
        while (leaked + LEAK_BLOCK <= leak_rate * t / 1000) {
            leak_slowly();
            leaked += LEAK_BLOCK;
        }
        /* The churn catches up with its rate in steps of 1 ms. */
        while ((double)churned < churn_rate * (double)t / 1000.0) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            size_t n = 16 + (size_t)(x % 2000);
            if (x % 64 == 0)
                churn_large(n * 64);
            else
                churn_small(n);
            churned += (long)n;
            /* One block in four is kept for RECENT_MS. */
            if (x % 4 == 1)
                keep_recent(n, t);
        }
        if (t - last_print >= 100) {
            printf("leaked %lld %ld\n", (long long)t, leaked);
            last_print = t;
        }
        usleep(1000);
    }
    printf("done %lld %ld\n", (long long)(now_ms() - start), leaked);
    for (;;)
        pause();
}
