/*
 * A thread that changes its signal mask hundreds of times a second around
 * short sections of work, as event loops and daemons do (mosquitto, sshd):
 * the CPU profile must still see its CPU time.
 *
 *   sigmask_churn SIGNAL [SECONDS_TO_RUN]
 *
 * The thread "churner" runs sections of spin rounds: one of 100-300
 * thousand (about 0.1-0.4 ms) in open_burn with nothing blocked, then one
 * of 20-60 thousand in masked_burn with SIGNAL ("chld": SIGCHLD, "prof": SIGPROF) blocked by
 * pthread_sigmask, and so on. SIGUSR1 prints the CPU time it used (ns) in
 * each, "open=<ns> masked=<ns>": the main thread reads the churner's CPU
 * clock from outside and splits it by the rounds run in each since the last
 * report (the churner itself makes no system call but the mask changes; see
 * cpu_burn.c for why).
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report.h"
#include "spin.h"
#include "timing.h"

static long rounds_open, rounds_masked; /* churner writes, main reads */
static int churn_sig;

__attribute__((noinline)) void open_burn(long n) { spin(n); }
__attribute__((noinline)) void masked_burn(long n) { spin(n); }

static void *churner(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "churner");
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, churn_sig);
    unsigned seed = 4242u;
    for (;;) {
        long lo = 100000 + rand_r(&seed) % 200001;
        long lm = 20000 + rand_r(&seed) % 40001;
        open_burn(lo);
        __atomic_fetch_add(&rounds_open, lo, __ATOMIC_RELAXED);
        pthread_sigmask(SIG_BLOCK, &one, NULL);
        masked_burn(lm);
        __atomic_fetch_add(&rounds_masked, lm, __ATOMIC_RELAXED);
        pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "chld") && strcmp(argv[1], "prof"))) {
        fprintf(stderr, "usage: sigmask_churn chld|prof [SECONDS]\n");
        return 2;
    }
    churn_sig = argv[1][0] == 'c' ? SIGCHLD : SIGPROF;
    int run = argc > 2 ? atoi(argv[2]) : 60;
    report_listen();
    pthread_t t;
    pthread_create(&t, NULL, churner, NULL);
    clockid_t clock;
    pthread_getcpuclockid(t, &clock);
    long long last_cpu = 0, total_open = 0, total_masked = 0;
    long last_o = 0, last_m = 0;
    long start = now_ns();
    while (now_ns() - start < run * 1000000000L) {
        sleep_us(20000);
        if (!report_asked())
            continue;
        struct timespec ts;
        clock_gettime(clock, &ts);
        long long cpu = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        long ro = __atomic_load_n(&rounds_open, __ATOMIC_RELAXED);
        long rm = __atomic_load_n(&rounds_masked, __ATOMIC_RELAXED);
        long dO = ro - last_o, dm = rm - last_m;
        if (dO + dm > 0) {
            long long d = cpu - last_cpu;
            long long part = (long long)((double)d * dO / (dO + dm));
            total_open += part;
            total_masked += d - part;
        }
        last_cpu = cpu;
        last_o = ro;
        last_m = rm;
        printf("open=%lld masked=%lld\n", total_open, total_masked);
        fflush(stdout);
    }
    return 0;
}
