/*
 * A peak and a fall: rise_to_peak() allocates MB mebibytes in 1 MiB blocks
 * (each written, so resident), frees them all at once, and the program
 * idles; background() keeps a few small blocks live throughout.
 *
 *   peak_rise MB [HOLD_MS]
 *
 * Prints "peak BYTES" (its own count at the top) and "freed" after the
 * fall. HOLD_MS (default 0) is how long the top is held before the fall.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK (1u << 20)

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
    char **blocks = calloc((size_t)mb, sizeof *blocks);
    long bytes = 0;
    for (long i = 0; i < mb; i++) {
        blocks[i] = malloc(BLOCK);
        memset(blocks[i], 1, BLOCK);
        bytes += BLOCK;
    }
    if (hold_ms > 0)
        usleep((useconds_t)hold_ms * 1000);
    for (long i = 0; i < mb; i++)
        free(blocks[i]);
    free(blocks);
    return bytes;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    background();
    /* Let the test connect first: the rise starts on a line of stdin. */
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;
    long bytes = rise_to_peak(atol(argv[1]), argc > 2 ? atol(argv[2]) : 0);
    printf("peak %ld\n", bytes);
    printf("freed\n");
    for (;;)
        pause();
}
