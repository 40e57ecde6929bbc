/*
 * A heap that grows until the kernel kills the process: grow_cache keeps
 * a MiB more every 100 ms (each block written, so that it is resident),
 * and never frees. Run it inside a memory cgroup with a limit.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void **cache;
static size_t n, cap;

__attribute__((noinline)) static void grow_cache(void)
{
    if (n == cap) {
        cap = cap ? cap * 2 : 1024;
        cache = realloc(cache, cap * sizeof *cache);
    }
    void *block = malloc(1 << 20);
    memset(block, 0x5a, 1 << 20);
    cache[n++] = block;
}

int main(void)
{
    for (;;) {
        grow_cache();
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
}
