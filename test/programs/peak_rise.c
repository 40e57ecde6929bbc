/*
 * A peak and a fall: rise_to_peak() allocates MB mebibytes in 2 MiB blocks
 * (each written, so resident), frees them all at once, and the program
 * idles; background() keeps a few small blocks live throughout.
 *
 *   peak_rise MB [HOLD_MS]
 *
 * The rise starts on SIGUSR1 (so a test can look first). Prints "ready",
 * then "peak BYTES" (its own count at the top) and "freed" after the fall.
 * HOLD_MS (default 0) is how long the top is held before the fall.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "block_signal.h"

#define BLOCK (2u << 20)

static void *volatile keep[64];

static __attribute__((noinline)) void background(void)
{
    for (int i = 0; i < 64; i++) {
        keep[i] = malloc(4096);
        memset(keep[i], 3, 4096);
    }
}

static __attribute__((noinline)) long rise_to_peak(long mb, long hold_ms)
{
    long n = mb * (1 << 20) / BLOCK;
    char **blocks = calloc((size_t)n, sizeof *blocks);
    long bytes = 0;
    for (long i = 0; i < n; i++) {
        blocks[i] = malloc(BLOCK);
        memset(blocks[i], 1, BLOCK);
        bytes += BLOCK;
    }
    if (hold_ms > 0)
        usleep((useconds_t)hold_ms * 1000);
    for (long i = 0; i < n; i++)
        free(blocks[i]);
    free(blocks);
    return bytes;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t usr1 = block_signal(SIGUSR1);
    background();
    printf("ready\n");
    int sig;
    sigwait(&usr1, &sig);
    long bytes = rise_to_peak(atol(argv[1]), argc > 2 ? atol(argv[2]) : 0);
    printf("peak %ld\n", bytes);
    printf("freed\n");
    for (;;)
        pause();
}
