/*
 * A thread the agent never sees start: created through the C library's
 * own pthread_create (looked up in libc itself), past the agent's
 * interposer, as jemalloc creates its background threads (its dlsym
 * RTLD_NEXT from a library loaded after the agent finds the C library's). It waits on a condition
 * variable with a timeout in hidden_waiter, 20 times 10 ms (the program
 * measures it), so its waits reach the block profile; their stacks must be
 * walked like any other thread's. Prints "waited_ns=N" and "done", then
 * sleeps until killed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "timing.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long waited_ns;

__attribute__((noinline)) void hidden_waiter(void)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < 20; i++) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 10 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        long t0 = now_ns();
        pthread_cond_timedwait(&cv, &mu, &until);
        waited_ns += now_ns() - t0;
    }
    pthread_mutex_unlock(&mu);
}

static void *run(void *arg)
{
    (void)arg;
    hidden_waiter();
    return NULL;
}

int main(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                  void *) = libc ? dlsym(libc, "pthread_create") : NULL;
    if (!create)
        return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_t t;
    if (create(&t, NULL, run, NULL) != 0)
        return 3;
    pthread_join(t, NULL);
    printf("waited_ns=%ld\ndone\n", waited_ns);
    for (;;)
        pause();
}
