/*
 * Host for the stripped-binary tests: every function that does work is
 * static, so a stripped copy of this program has no name for any of them
 * (not even in .dynsym). A thread started by stripped_spawn runs
 * stripped_outer -> stripped_burn for ever (until killed); the main thread
 * sleeps. The test strips copies of this binary in several ways and checks
 * which names a profile of each copy carries.
 *
 *   stripped_target SECONDS_TO_RUN
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile unsigned long sink;

static __attribute__((noinline)) void stripped_burn(long n)
{
    unsigned long x = sink;
    for (long i = 0; i < n; i++)
        x = x * 2862933555777941757ULL + 3037000493ULL;
    sink = x;
}

static __attribute__((noinline)) void stripped_outer(void)
{
    for (;;)
        stripped_burn(1000000);
}

static void *stripped_thread(void *arg)
{
    (void)arg;
    stripped_outer();
    return NULL;
}

static __attribute__((noinline)) pthread_t stripped_spawn(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, stripped_thread, NULL) != 0) {
        perror("pthread_create");
        exit(1);
    }
    return t;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 60;
    stripped_spawn();
    printf("ready\n");
    fflush(stdout);
    sleep((unsigned)seconds);
    return 0;
}
