/*
 * A host that profiles itself the old way: its own SIGPROF handler and
 * setitimer(ITIMER_PROF). It burns CPU in own_burn and prints how many
 * SIGPROF it received and its process CPU time, once a second:
 * "sigprof=N cpu_ms=M". The agent must leave its handler and its signals
 * alone.
 *
 *   cpu_sigprof SECONDS
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile unsigned long sink;
static volatile long sigprof_count;

static void on_sigprof(int sig)
{
    (void)sig;
    sigprof_count++;
}

__attribute__((noinline)) static void own_burn(long n)
{
    unsigned long x = sink;
    for (long i = 0; i < n; i++)
        x = x * 2862933555777941757ULL + 3037000493ULL;
    sink = x;
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 30;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigprof;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = {{0, 10000}, {0, 10000}};
    setitimer(ITIMER_PROF, &it, NULL);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long last = 0;
    for (;;) {
        own_burn(200000);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long el = now.tv_sec - start.tv_sec;
        if (el != last) {
            last = el;
            struct timespec cpu;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
            printf("sigprof=%ld cpu_ms=%ld\n", sigprof_count,
                   (long)cpu.tv_sec * 1000 + cpu.tv_nsec / 1000000);
            fflush(stdout);
        }
        if (el >= secs)
            return 0;
    }
}
