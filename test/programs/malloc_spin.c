/*
 * A single-threaded program that spends most of its time inside the C
 * library's allocator: it replaces random blocks of a working set with
 * blocks of random sizes, each filled with a byte derived from its slot,
 * and checks every block's bytes before freeing it. A single-threaded
 * glibc process takes no allocator lock, so code run on its thread while
 * it is stopped inside malloc or free (an attach's dlopen) corrupts the
 * heap: glibc aborts, or a check here fails.
 *
 * malloc_spin STOPFILE: prints "started" when running, and runs until
 * STOPFILE exists; then frees everything and prints "ok N" (N blocks
 * replaced), or "corrupt SLOT" and exits 1.
 */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 4096

static unsigned char *block[SLOTS];
static size_t size[SLOTS];

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* 1 when every byte of slot i holds its fill. */
static int intact(int i)
{
    for (size_t k = 0; k < size[i]; k++)
        if (block[i][k] != (unsigned char)(i * 7 + 1))
            return 0;
    return 1;
}

static int replace(int i, size_t bytes)
{
    if (block[i] && !intact(i))
        return -1;
    free(block[i]);
    block[i] = malloc(bytes);
    if (!block[i])
        return -1;
    size[i] = bytes;
    memset(block[i], i * 7 + 1, bytes);
    return 0;
}

/* A block above the top of the heap, freed at once: the heap grows (brk)
 * and is trimmed back (brk again), so that much of the time the thread is
 * inside the allocator's system calls (sysmalloc, systrim). */
static int grow_and_trim(uint64_t r)
{
    size_t bytes = 160 * 1024 + (r >> 40) % 4096;
    unsigned char *p = malloc(bytes);
    if (!p)
        return -1;
    p[0] = p[bytes - 1] = 1;
    free(p);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    uint64_t seed = 0x9e3779b97f4a7c15ULL, n = 0;
    /* Fixed thresholds (glibc's move with the blocks freed): the large
     * blocks come from the top of the heap, which is trimmed after each. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 10);
    printf("started\n");
    fflush(stdout);
    for (;;) {
        for (int round = 0; round < 20000; round++, n++) {
            uint64_t r = next_random(&seed);
            int i = (int)(r % SLOTS);
            /* Mostly small blocks (the allocator's bins), some of 64..256
             * KiB (its top chunk and mmap thresholds move). */
            size_t bytes = (r >> 20) % 64 == 0 ? 65536 + (r >> 32) % 196608
                                                : 1 + (r >> 32) % 512;
            if (replace(i, bytes) != 0 || grow_and_trim(r) != 0) {
                printf("corrupt %d\n", i);
                return 1;
            }
        }
        if (access(argv[1], F_OK) == 0)
            break;
    }
    for (int i = 0; i < SLOTS; i++) {
        if (block[i] && !intact(i)) {
            printf("corrupt %d\n", i);
            return 1;
        }
        free(block[i]);
    }
    printf("ok %llu\n", (unsigned long long)n);
    return 0;
}
