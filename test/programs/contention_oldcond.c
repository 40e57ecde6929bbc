/*
 * Test host bound to the OLD pthread_cond_* of glibc (@GLIBC_2.2.5, the
 * compatibility versions that treat a condition as a pointer to a lazily
 * allocated one), as a binary built before 2003 would be. A thread waits
 * in old_cond_waiter 10 times while main signals it with the old
 * pthread_cond_signal; prints "done" when every wait ended, then sleeps.
 * Under an agent that forwarded the old wait to the new code, the old
 * signal would never wake it (or the two layouts would corrupt each other).
 */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

__asm__(".symver pthread_cond_wait,pthread_cond_wait@GLIBC_2.2.5");
__asm__(".symver pthread_cond_signal,pthread_cond_signal@GLIBC_2.2.5");
__asm__(".symver pthread_cond_init,pthread_cond_init@GLIBC_2.2.5");

static pthread_cond_t cv;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int ready, woken;

static __attribute__((noinline)) void old_cond_waiter(void)
{
    pthread_mutex_lock(&mu);
    while (!ready)
        pthread_cond_wait(&cv, &mu);
    ready = 0;
    woken++;
    pthread_mutex_unlock(&mu);
}

static void *waiter(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10; i++)
        old_cond_waiter();
    return NULL;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_cond_init(&cv, NULL);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    for (int i = 0; i < 10; i++) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&mu);
        ready = 1;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        while (__atomic_load_n(&woken, __ATOMIC_ACQUIRE) <= i)
            usleep(100);
    }
    pthread_join(t, NULL);
    printf("done\n");
    for (;;)
        pause();
}
