/*
 * Test host: creates threads from two known functions and then waits, so
 * that threadcreate, cmdline and symbol can be checked against what it did.
 * Prints the address of one of its static functions for the symbol test.
 *
 *   spawner SECONDS [ARGS...]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile int stop;

static void *idle_worker(void *arg)
{
    (void)arg;
    while (!stop)
        usleep(10000);
    return NULL;
}

static __attribute__((noinline)) void spawn_pool(pthread_t *t, int n)
{
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, idle_worker, NULL);
}

static __attribute__((noinline)) void spawn_other(pthread_t *t, int n)
{
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, idle_worker, NULL);
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 30;
    pthread_t pool[3], other[2];
    spawn_pool(pool, 3);
    spawn_other(other, 2);
    printf("spawn_other=%p\n", (void *)spawn_other);
    fflush(stdout);
    sleep((unsigned)seconds);
    stop = 1;
    for (int i = 0; i < 3; i++)
        pthread_join(pool[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(other[i], NULL);
    return 0;
}
