/*
 * Arena growth: THREADS producer threads allocate small blocks (each in its
 * own glibc arena) and hand them to consumer threads, which free all but
 * one in KEEP: the freed holes stay resident inside the arenas.
 *
 *   arena_growth THREADS MB_PER_THREAD KEEP
 *
 * Then prints what it measured of itself, once all threads are done and
 * again on each SIGUSR1:
 *   mallinfo ARENA UORDBLKS FORDBLKS HBLKHD KEEPCOST
 *   rss VmRSS_BYTES
 * and idles (its threads stay alive, blocked, so their stacks stay).
 */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 1000
#define BATCH 1024

struct channel {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    void **items;
    size_t n, cap;
    int done;
};

static long mb_per_thread, keep_one_in;
static pthread_barrier_t finished;
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static void *volatile *kept;
static size_t nkept;
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;

static void idle(void)
{
    pthread_mutex_lock(&idle_lock);
    for (;;)
        pthread_cond_wait(&idle_cond, &idle_lock);
}

static __attribute__((noinline)) void *produce_block(void)
{
    char *p = malloc(BLOCK);
    memset(p, 5, BLOCK);
    return p;
}

static void *producer(void *arg)
{
    struct channel *c = arg;
    long n = mb_per_thread * 1000000 / BLOCK;
    for (long i = 0; i < n; i += BATCH) {
        void *batch[BATCH];
        for (int j = 0; j < BATCH; j++)
            batch[j] = produce_block();
        pthread_mutex_lock(&c->lock);
        for (int j = 0; j < BATCH; j++) {
            if (c->n == c->cap) {
                c->cap = c->cap ? c->cap * 2 : 4096;
                c->items = realloc(c->items, c->cap * sizeof *c->items);
            }
            c->items[c->n++] = batch[j];
        }
        pthread_cond_signal(&c->cond);
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_lock(&c->lock);
    c->done = 1;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_barrier_wait(&finished);
    idle();
    return NULL;
}

static void *consumer(void *arg)
{
    struct channel *c = arg;
    long seen = 0;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        while (c->n == 0 && !c->done)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->n == 0 && c->done) {
            pthread_mutex_unlock(&c->lock);
            break;
        }
        void *p = c->items[--c->n];
        pthread_mutex_unlock(&c->lock);
        if (seen++ % keep_one_in == 0) {
            pthread_mutex_lock(&kept_lock);
            kept[nkept++] = p;
            pthread_mutex_unlock(&kept_lock);
        } else {
            free(p);
        }
    }
    pthread_barrier_wait(&finished);
    idle();
    return NULL;
}

static void report(void)
{
    struct mallinfo2 m = mallinfo2();
    printf("mallinfo %zu %zu %zu %zu %zu\n", m.arena, m.uordblks, m.fordblks,
           m.hblkhd, m.keepcost);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long rss_kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            rss_kb = atol(line + 6);
    if (f)
        fclose(f);
    printf("rss %ld\n", rss_kb * 1024);
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int threads = atoi(argv[1]);
    mb_per_thread = atol(argv[2]);
    keep_one_in = atol(argv[3]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL); /* the threads inherit the mask */
    /* Producers round their count up to whole batches. */
    long per_thread = mb_per_thread * 1000000 / BLOCK + BATCH;
    kept = calloc((size_t)(threads * (per_thread / keep_one_in + 1)),
                  sizeof *kept);
    pthread_barrier_init(&finished, NULL, (unsigned)(2 * threads + 1));
    struct channel *cs = calloc((size_t)threads, sizeof *cs);
    for (int i = 0; i < threads; i++) {
        pthread_mutex_init(&cs[i].lock, NULL);
        pthread_cond_init(&cs[i].cond, NULL);
        pthread_t t;
        pthread_create(&t, NULL, producer, &cs[i]);
        pthread_create(&t, NULL, consumer, &cs[i]);
    }
    pthread_barrier_wait(&finished);
    for (int i = 0; i < threads; i++)
        free(cs[i].items);
    report();
    printf("ready\n");
    for (;;) {
        int sig;
        sigwait(&usr1, &sig);
        report();
    }
}
