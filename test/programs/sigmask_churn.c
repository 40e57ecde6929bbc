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
 *
 * "late" is "chld" with one more step: whenever a SIGPROF handler appears
 * (a CPU profile starts) the churner blocks every signal for 300 ms by raw
 * system calls, unseen by any interposer, asleep, then sets its mask back
 * the same way: every look at its mask in that span finds it blocked, as
 * one does that falls in a mask interposer's own window. Its next change
 * of mask must give it its sampler.
 *
 * "handler" instead sends the churner SIGUSR2 after each open_burn section
 * (no masked_burn): its handler runs under a mask that blocks every other
 * signal (sa_mask), and changes the mask there as runtimes' handlers do:
 * it unblocks the synchronous error signals (as OpenJDK's do at their
 * start), and every other time sets back the mask it interrupted. The
 * kernel lifts the handler's mask at its return, where no interposer sees.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "profiling_began.h"
#include "report.h"
#include "spin.h"
#include "timing.h"

static long rounds_open, rounds_masked; /* churner writes, main reads */
static int churn_sig; /* 0: "handler" */
static int late;

__attribute__((noinline)) void open_burn(long n) { spin(n); }
__attribute__((noinline)) void masked_burn(long n) { spin(n); }

/* Async-signal-safe: pthread_sigmask only. */
static void on_usr2(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    static __thread unsigned calls;
    if (calls++ % 2) {
        ucontext_t *uc = ucv;
        pthread_sigmask(SIG_SETMASK, &uc->uc_sigmask, NULL);
        return;
    }
    sigset_t errors;
    sigemptyset(&errors);
    sigaddset(&errors, SIGSEGV);
    sigaddset(&errors, SIGBUS);
    sigaddset(&errors, SIGFPE);
    sigaddset(&errors, SIGILL);
    pthread_sigmask(SIG_UNBLOCK, &errors, NULL);
}

static void handler_churn(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr2;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    sigaction(SIGUSR2, &sa, NULL);
    unsigned seed = 4242u;
    for (;;) {
        long lo = 100000 + rand_r(&seed) % 200001;
        open_burn(lo);
        __atomic_fetch_add(&rounds_open, lo, __ATOMIC_RELAXED);
        pthread_kill(pthread_self(), SIGUSR2);
    }
}


/* "late": 1 when a SIGPROF handler was installed since the last call. */
static int profile_began(void)
{
    static int had;
    int has = sigprof_handled();
    int began = has && !had;
    had = has;
    return began;
}

static void hold_every_signal(void)
{
    unsigned long all = ~0UL, old;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, 8);
    sleep_us(300000);
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
}

static void *churner(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "churner");
    if (!churn_sig)
        handler_churn();
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, churn_sig);
    unsigned seed = 4242u;
    for (;;) {
        long lo = 100000 + rand_r(&seed) % 200001;
        long lm = 20000 + rand_r(&seed) % 40001;
        if (late && profile_began())
            hold_every_signal();
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
    if (argc < 2 || (strcmp(argv[1], "chld") && strcmp(argv[1], "prof") && strcmp(argv[1], "late") &&
                     strcmp(argv[1], "handler"))) {
        fprintf(stderr,
                "usage: sigmask_churn chld|prof|late|handler [SECONDS]\n");
        return 2;
    }
    late = argv[1][0] == 'l';
    churn_sig = argv[1][0] == 'c' || late ? SIGCHLD
                : argv[1][0] == 'p'       ? SIGPROF
                                          : 0;
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
