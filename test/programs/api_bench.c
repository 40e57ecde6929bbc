/*
 * Benchmark host for the public API (pprofagent.h), with or without the
 * agent:
 *
 *   api_bench labels N    N x (save, set "endpoint", restore); prints ns/op
 *   api_bench custom N    N x (add, remove) on a custom profile; ns/op
 *   api_bench threads N   N threads waiting on a condition variable, then
 *                         sleeps (for timing goroutine dumps over HTTP)
 */
#include "agent/pprofagent.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

__attribute__((noinline)) static void labelled(long n)
{
    static const char *const values[] = {"/api", "/static", "/health"};
    for (long i = 0; i < n; i++) {
        pprof_labels saved = pprof_labels_save();
        pprof_label_set("endpoint", values[i % 3]);
        pprof_labels_restore(saved);
    }
}

__attribute__((noinline)) static void custom(long n)
{
    pprof_profile *p = pprof_profile_new("bench.handles");
    for (long i = 0; i < n; i++) {
        pprof_profile_add(p, (void *)(i + 1), 0);
        pprof_profile_remove(p, (void *)(i + 1));
    }
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    for (;;)
        pthread_cond_wait(&never, &lock);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "labels";
    long n = argc > 2 ? atol(argv[2]) : 1000000;
    if (strcmp(mode, "threads") == 0) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        for (long i = 0; i < n; i++) {
            pthread_t t;
            if (pthread_create(&t, &attr, waiter, NULL) != 0)
                return 1;
        }
        printf("started %ld\n", n);
        fflush(stdout);
        for (;;)
            pause();
    }
    double t0 = now_ns();
    if (strcmp(mode, "custom") == 0)
        custom(n);
    else
        labelled(n);
    double t1 = now_ns();
    printf("%s %.1f ns/op\n", mode, (t1 - t0) / (double)n);
    return 0;
}
