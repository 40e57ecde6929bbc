/*
 * Shares under CPU contention: one thread ("splitter") alternates between
 * hot_a and hot_b, about three parts to one, and reads its own thread CPU
 * clock between the two calls, so that a system call sits at each
 * boundary as in a server (a read or an epoll_wait between two pieces of
 * work). It adds the CPU time each call took to its totals. SIGUSR1 makes
 * the main thread print them (ns): "a=<ns> b=<ns>".
 *
 *   cpu_split SECONDS_TO_RUN
 *
 * The clock read at the boundaries is the point: on a machine with more
 * runnable threads than CPUs the splitter is mostly switched out at the
 * return of one of those system calls, and a sampler that notices its
 * expiries late delivers them after the switch, in the function that
 * follows (cpu_burn.c avoids this on purpose; this program provokes it).
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

static long long total_a, total_b; /* splitter writes, main reads (atomics) */

__attribute__((noinline)) void hot_a(long n) { spin(n); }
__attribute__((noinline)) void hot_b(long n) { spin(n); }

static void *splitter(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "splitter");
    unsigned seed = 4242u;
    long long t0 = thread_cpu_ns();
    for (;;) {
        /* Lengths vary at random around 3:1 (about 0.3 ms and 0.1 ms):
         * no fixed pattern to alias with the kernel's tick. */
        long la = 200000 + rand_r(&seed) % 200001;
        long lb = 50000 + rand_r(&seed) % 100001;
        hot_a(la);
        long long t1 = thread_cpu_ns();
        hot_b(lb);
        long long t2 = thread_cpu_ns();
        __atomic_fetch_add(&total_a, t1 - t0, __ATOMIC_RELAXED);
        __atomic_fetch_add(&total_b, t2 - t1, __ATOMIC_RELAXED);
        t0 = t2;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int run = argc > 1 ? atoi(argv[1]) : 60;
    report_listen();
    pthread_t t;
    pthread_create(&t, NULL, splitter, NULL);
    printf("started\n");
    fflush(stdout);
    long start = now_ns();
    for (;;) {
        sleep_us(20000);
        if (report_asked()) {
            printf("a=%lld b=%lld\n",
                   __atomic_load_n(&total_a, __ATOMIC_RELAXED),
                   __atomic_load_n(&total_b, __ATOMIC_RELAXED));
            fflush(stdout);
        }
        if (now_ns() - start >= (long)run * 1000000000L)
            return 0;
    }
}
