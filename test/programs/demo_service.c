/*
 * A small stand-in for a real service, for `make demo`: worker threads
 * handle "requests" (parse, checksum, render), keep a cache of responses
 * and share a lock, so that every profile has something true to show.
 *
 *   demo_service [SECONDS]   (default: run until killed)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 3
#define CACHE_SLOTS 4096

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static char *cache[CACHE_SLOTS];
static volatile int stop;

static __attribute__((noinline)) uint64_t parse_request(uint64_t seed)
{
    uint64_t h = seed;
    for (int i = 0; i < 20000; i++)
        h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    return h;
}

static __attribute__((noinline)) uint64_t compute_checksum(uint64_t h)
{
    for (int i = 0; i < 60000; i++)
        h ^= (h << 13) ^ (h >> 7) ^ (h << 17);
    return h;
}

static __attribute__((noinline)) char *render_response(uint64_t h)
{
    size_t size = 256 + (size_t)(h % 4096);
    char *body = malloc(size);
    if (body)
        memset(body, (int)(h & 0x7f), size);
    return body;
}

static __attribute__((noinline)) void store_in_cache(uint64_t h, char *body)
{
    pthread_mutex_lock(&cache_lock);
    size_t slot = (size_t)(h % CACHE_SLOTS);
    free(cache[slot]);
    cache[slot] = body;
    pthread_mutex_unlock(&cache_lock);
}

static void *worker(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg;
    while (!stop) {
        uint64_t h = compute_checksum(parse_request(seed++));
        store_in_cache(h, render_response(h));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 0;
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i * 1000003));
    if (seconds > 0) {
        sleep((unsigned)seconds);
    } else {
        for (;;)
            pause();
    }
    stop = 1;
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    return 0;
}
