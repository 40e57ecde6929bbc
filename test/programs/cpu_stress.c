/*
 * CPU sampler stress host: while two threads burn CPU, one thread dlopen()s
 * a plugin, runs a little of its code and dlclose()s it in a loop (the
 * sampler's unwinder must never touch an unmapped object nor take the
 * loader lock), one allocates and frees without pause (samples land inside
 * malloc), and one forks and reaps children (a busy profiling signal must
 * not make fork restart forever). Prints its progress every second:
 * "dl=N forks=N allocs=N".
 *
 *   cpu_stress PLUGIN.so SECONDS
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static long dl_rounds, forks, allocs;
static const char *plugin;

__attribute__((noinline)) static void stress_burn(long n)
{
    unsigned long x = sink;
    for (long i = 0; i < n; i++)
        x = x * 2862933555777941757ULL + 3037000493ULL;
    sink = x;
}

static void *burner(void *arg)
{
    (void)arg;
    for (;;)
        stress_burn(1000000);
    return NULL;
}

static void *dl_loop(void *arg)
{
    (void)arg;
    for (;;) {
        void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            exit(3);
        }
        void (*fn)(long) = (void (*)(long))dlsym(h, "plug_spin");
        if (fn)
            fn(20000);
        dlclose(h);
        __atomic_fetch_add(&dl_rounds, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *alloc_loop(void *arg)
{
    (void)arg;
    for (;;) {
        void *p[64];
        for (int i = 0; i < 64; i++)
            p[i] = malloc(16 + (size_t)i * 24);
        for (int i = 0; i < 64; i++)
            free(p[i]);
        __atomic_fetch_add(&allocs, 64, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *fork_loop(void *arg)
{
    (void)arg;
    /* Some memory so that fork has page tables to copy. */
    size_t size = 64 << 20;
    char *mem = malloc(size);
    if (mem)
        memset(mem, 1, size);
    for (;;) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(7);
        if (pid > 0) {
            int status = 0;
            waitpid(pid, &status, 0);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 7) {
                fprintf(stderr, "child status %d\n", status);
                exit(4);
            }
            __atomic_fetch_add(&forks, 1, __ATOMIC_RELAXED);
        }
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    plugin = argv[1];
    int secs = atoi(argv[2]);
    pthread_t t;
    pthread_create(&t, NULL, burner, NULL);
    pthread_create(&t, NULL, burner, NULL);
    pthread_create(&t, NULL, dl_loop, NULL);
    pthread_create(&t, NULL, alloc_loop, NULL);
    pthread_create(&t, NULL, fork_loop, NULL);
    for (int s = 0; s < secs; s++) {
        sleep(1);
        printf("dl=%ld forks=%ld allocs=%ld\n",
               __atomic_load_n(&dl_rounds, __ATOMIC_RELAXED),
               __atomic_load_n(&forks, __ATOMIC_RELAXED),
               __atomic_load_n(&allocs, __ATOMIC_RELAXED));
        fflush(stdout);
    }
    return 0;
}
