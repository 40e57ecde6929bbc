/*
 * A host built with a sanitizer (test/integration/sanitizer_hosts.sh
 * builds it with -fsanitize=address, thread, undefined and leak, with gcc
 * and clang; the plain build here is the reference). It does what every
 * sanitized program does at start and after: allocates, copies and
 * compares strings, creates a thread that takes a mutex, waits on a
 * condition variable, then prints what it computed and exits 3.
 *
 *   sanitizer_host quick   the work, the line, exit 3
 *   sanitizer_host serve   the work, then spins in sanitizer_busy until
 *                          SIGTERM (at most 120 s), then the line, exit 3
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spin.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static long total;
static int done;
static volatile sig_atomic_t stop;

static void *worker(void *arg)
{
    long n = (long)arg;
    for (long i = 1; i <= n; i++) {
        char *p = malloc(32 + (size_t)i % 64);
        snprintf(p, 32, "item-%ld", i);
        char copy[32];
        memcpy(copy, p, strlen(p) + 1);
        pthread_mutex_lock(&lock);
        total += (long)strlen(copy) + (strcmp(copy, "item-1") == 0);
        pthread_mutex_unlock(&lock);
        free(p);
    }
    pthread_mutex_lock(&lock);
    done = 1;
    pthread_cond_signal(&done_cond);
    pthread_mutex_unlock(&lock);
    return NULL;
}

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

/* The CPU a profile must find, until SIGTERM. */
__attribute__((noinline)) static void sanitizer_busy(void)
{
    time_t end = time(NULL) + 120;
    while (!stop && time(NULL) < end)
        spin(1000000);
}

int main(int argc, char **argv)
{
    int serve = argc >= 2 && strcmp(argv[1], "serve") == 0;
    signal(SIGTERM, on_term);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void *)1000L) != 0)
        return 1;
    pthread_mutex_lock(&lock);
    while (!done)
        pthread_cond_wait(&done_cond, &lock);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    if (serve)
        sanitizer_busy();
    printf("total=%ld\n", total);
    return 3;
}
