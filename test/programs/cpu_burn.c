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
 * the clock read, and the kernel, which checks CPU timers only on its
 * tick, charged the CPU of stretches run between two such switches where
 * the next tick found the thread: the profile drifted from the truth
 * (by up to 3 points) because the truth's own measurement steered the
 * scheduler. Read every few milliseconds from inside the loop, it still
 * drew the profile about a point away. So the burners make no system call
 * at all: each counts the rounds of the spin loop it ran in hot_a and in
 * hot_b, and the main thread, when asked for the figures, reads each
 * burner's CPU clock from outside and splits the CPU it used since the
 * last report between hot_a and hot_b by the rounds each ran meanwhile
 * (the same loop, interleaved every 0.1-0.4 ms).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "report.h"
#include "spin.h"
#include "timing.h"

#define MAX_BURNERS 64

/* One per burner. rounds_a/rounds_b: written by the burner, read by the
 * main thread (atomics); the rest belongs to the main thread. */
struct burner {
    pthread_t thread;
    long rounds_a, rounds_b;
    long long last_cpu;
    long last_a, last_b;
};
static struct burner burners[MAX_BURNERS];
static int nburners;
static long long total_a, total_b; /* main thread only */

__attribute__((noinline)) void hot_a(long n) { spin(n); }
__attribute__((noinline)) void hot_b(long n) { spin(n); }
__attribute__((noinline)) void late_burn(long n) { spin(n); }

static void *burner(void *arg)
{
    struct burner *b = arg;
    int k = (int)(b - burners);
    char name[16];
    snprintf(name, sizeof name, "burner-%d", k);
    pthread_setname_np(pthread_self(), name);
    unsigned seed = 777u + (unsigned)k;
    for (;;) {
        /* Lengths vary at random around 3:1: a strictly periodic pattern
         * much shorter than the kernel tick, which is when CPU timers
         * fire, could alias with it. The shares are measured, not
         * assumed. */
        long la = 200000 + rand_r(&seed) % 200001;
        long lb = 50000 + rand_r(&seed) % 100001;
        hot_a(la);
        __atomic_fetch_add(&b->rounds_a, la, __ATOMIC_RELAXED);
        hot_b(lb);
        __atomic_fetch_add(&b->rounds_b, lb, __ATOMIC_RELAXED);
    }
    return NULL;
}

static long long cpu_of(pthread_t t)
{
    clockid_t c;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &c) != 0 || clock_gettime(c, &ts) != 0)
        return -1;
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Adds each burner's CPU since the last call to the totals, split by the
 * rounds it ran in each function meanwhile. */
static void account(void)
{
    for (int i = 0; i < nburners; i++) {
        struct burner *b = &burners[i];
        long long cpu = cpu_of(b->thread);
        long ra = __atomic_load_n(&b->rounds_a, __ATOMIC_RELAXED);
        long rb = __atomic_load_n(&b->rounds_b, __ATOMIC_RELAXED);
        long da = ra - b->last_a, db = rb - b->last_b;
        if (cpu >= 0 && da + db > 0) {
            long long d = cpu - b->last_cpu;
            long long part = (long long)((double)d * da / (da + db));
            total_a += part;
            total_b += d - part;
        }
        b->last_cpu = cpu;
        b->last_a = ra;
        b->last_b = rb;
    }
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

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    int run = argc > 2 ? atoi(argv[2]) : 60;
    int late_delay = argc > 3 ? atoi(argv[3]) : -1;
    report_listen();
    nburners = n < MAX_BURNERS ? n : MAX_BURNERS;
    for (int i = 0; i < nburners; i++)
        pthread_create(&burners[i].thread, NULL, burner, &burners[i]);
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
        if (report_asked()) {
            account();
            printf("a=%lld b=%lld\n", total_a, total_b);
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
