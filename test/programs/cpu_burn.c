/*
 * CPU truth host: N threads ("burner-K") each spend three parts of their
 * CPU in hot_a and one part in hot_b, both through the same spin loop, and
 * measure the CPU time each function took with the thread CPU clock.
 * SIGUSR1 prints the totals (ns): "a=<ns> b=<ns>". After the delay given
 * as the 3rd argument, a thread "late-worker" starts, burns about half a
 * second of CPU in late_burn and exits.
 *
 *   cpu_burn THREADS SECONDS_TO_RUN LATE_DELAY_S
 *
 * Where the clock is read matters on a busy machine. Reading the thread
 * CPU clock is a system call that brings the scheduler's accounting of the
 * thread up to date, and a thread whose time slice is used up is switched
 * out right there. Read at every entry and exit of hot_a and hot_b (every
 * 0.1-0.4 ms), those boundaries became where the burners lost the CPU:
 * beside two CPU hogs most of their involuntary switches happened inside
 * the clock read. The kernel checks CPU timers only on its tick, so a
 * stretch of hot_b between two such switches could run with no tick at
 * all, its CPU then charged where the next tick found the thread, mostly
 * in hot_a: the profile drifted from the truth because the truth's own
 * measurement steered the scheduler. So the clock is read every 4-11 ms of
 * work, after whichever chunk of the spin loop comes next, wherever that
 * falls, and the CPU between two readings is split between hot_a and hot_b
 * by the rounds of the same loop each ran meanwhile.
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

#define CHUNK 4096L /* spin rounds between looks at the meter: a few µs */

/* Each burner's meter: the CPU clock at the last reading, the rounds each
 * function ran since, and how many chunks until the next reading. */
struct meter {
    long long cpu;
    long rounds_a, rounds_b;
    long chunks_left;
    unsigned seed;
};
static __thread struct meter meter;

static void meter_read(void)
{
    long long now = thread_cpu_ns();
    long long d = now - meter.cpu;
    long n = meter.rounds_a + meter.rounds_b;
    if (n > 0) {
        long long da = d * meter.rounds_a / n;
        __atomic_fetch_add(&total_a, da, __ATOMIC_RELAXED);
        __atomic_fetch_add(&total_b, d - da, __ATOMIC_RELAXED);
    }
    meter.cpu = now;
    meter.rounds_a = meter.rounds_b = 0;
    /* 4-11 ms of work at 0.9 ns a round. */
    meter.chunks_left = 1000 + rand_r(&meter.seed) % 2000;
}

static void work(long n, long *rounds)
{
    while (n > 0) {
        long c = n < CHUNK ? n : CHUNK;
        spin(c);
        n -= c;
        *rounds += c;
        if (--meter.chunks_left <= 0)
            meter_read();
    }
}

__attribute__((noinline)) void hot_a(long n) { work(n, &meter.rounds_a); }
__attribute__((noinline)) void hot_b(long n) { work(n, &meter.rounds_b); }
__attribute__((noinline)) void late_burn(long n) { spin(n); }

static void *burner(void *arg)
{
    char name[16];
    snprintf(name, sizeof name, "burner-%d", (int)(long)arg);
    pthread_setname_np(pthread_self(), name);
    unsigned seed = 777u + (unsigned)(long)arg;
    meter.seed = 999u + (unsigned)(long)arg;
    meter.cpu = thread_cpu_ns();
    meter.chunks_left = 1000 + rand_r(&meter.seed) % 2000;
    for (;;) {
        /* Lengths vary at random around 3:1: a strictly periodic pattern
         * much shorter than the kernel tick, which is when CPU timers
         * fire, could alias with it. The shares are measured, not
         * assumed. */
        long la = 200000 + rand_r(&seed) % 200001;
        long lb = 50000 + rand_r(&seed) % 100001;
        hot_a(la);
        hot_b(lb);
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
