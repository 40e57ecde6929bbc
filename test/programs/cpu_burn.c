/*
 * CPU truth host: N threads ("burner-K") each spend three parts of their
 * CPU in hot_a and one part in hot_b, both through the same spin loop, and
 * measure the CPU time each function really took with the thread CPU
 * clock. SIGUSR1 prints the totals (ns): "a=<ns> b=<ns>". After the delay
 * given as the 3rd argument, a thread "late-worker" starts, burns about
 * half a second of CPU in late_burn and exits.
 *
 *   cpu_burn THREADS SECONDS_TO_RUN LATE_DELAY_S
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "spin.h"
#include "timing.h"

static long long total_a, total_b; /* atomics */
static volatile sig_atomic_t report;

__attribute__((noinline)) void hot_a(long n) { spin(n); }
__attribute__((noinline)) void hot_b(long n) { spin(n); }
__attribute__((noinline)) void late_burn(long n) { spin(n); }

static void *burner(void *arg)
{
    char name[16];
    snprintf(name, sizeof name, "burner-%d", (int)(long)arg);
    pthread_setname_np(pthread_self(), name);
    unsigned seed = 777u + (unsigned)(long)arg;
    for (;;) {
        /* Lengths vary at random around 3:1: a strictly periodic pattern
         * much shorter than the kernel tick, which is when CPU timers
         * fire, could alias with it. The shares are measured, not
         * assumed. */
        long la = 200000 + rand_r(&seed) % 200001;
        long lb = 50000 + rand_r(&seed) % 100001;
        long long t0 = thread_cpu_ns();
        hot_a(la);
        long long t1 = thread_cpu_ns();
        hot_b(lb);
        long long t2 = thread_cpu_ns();
        __atomic_fetch_add(&total_a, t1 - t0, __ATOMIC_RELAXED);
        __atomic_fetch_add(&total_b, t2 - t1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void *late(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "late-worker");
    long long t0 = thread_cpu_ns();
    while (thread_cpu_ns() - t0 < 500000000LL)
        late_burn(100000);
    return NULL;
}

static void on_usr1(int sig)
{
    (void)sig;
    report = 1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    int run = argc > 2 ? atoi(argv[2]) : 60;
    int late_delay = argc > 3 ? atoi(argv[3]) : -1;
    signal(SIGUSR1, on_usr1);
    pthread_t t;
    for (int i = 0; i < n; i++)
        pthread_create(&t, NULL, burner, (void *)(long)i);
    printf("started %d\n", n);
    fflush(stdout);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int late_started = 0;
    for (;;) {
        struct timespec now, nap = {0, 20000000};
        nanosleep(&nap, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long el = now.tv_sec - start.tv_sec;
        if (report) {
            report = 0;
            printf("a=%lld b=%lld\n",
                   __atomic_load_n(&total_a, __ATOMIC_RELAXED),
                   __atomic_load_n(&total_b, __ATOMIC_RELAXED));
            fflush(stdout);
        }
        if (late_delay >= 0 && !late_started && el >= late_delay) {
            late_started = 1;
            pthread_t lt;
            pthread_create(&lt, NULL, late, NULL);
            pthread_detach(lt);
            printf("late started\n");
            fflush(stdout);
        }
        if (el >= run)
            return 0;
    }
}
