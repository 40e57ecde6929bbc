/*
 * An event loop as redis's main thread is one: it waits (200 us, then
 * 300 us: two different calls, so what /proc shows for it changes every
 * few hundred microseconds) and between two waits works a short burst in
 * burst_work (a fixed number of rounds: some tens of microseconds). Its
 * CPU time is nearly all burst_work's; its bursts end long before the
 * kernel's CPU timers, checked at its ticks, fire in them. Prints
 * "ready" once looping, and on SIGUSR1 "bursts=N" (how many so far).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "report.h"

static volatile uint64_t sink;

__attribute__((noinline)) static void wait_short(const struct timespec *t)
{
    nanosleep(t, NULL);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void burst_work(void)
{
    uint64_t h = sink;
    for (int i = 0; i < 20000; i++)
        h = (h ^ (uint64_t)i) * 0x100000001b3ULL;
    sink = h;
}

__attribute__((noinline)) static void event_loop(void)
{
    static const struct timespec a = {0, 200000}, b = {0, 300000};
    unsigned long bursts = 0;
    for (;;) {
        wait_short(&a);
        burst_work();
        wait_short(&b);
        burst_work();
        bursts += 2;
        if (report_asked()) {
            printf("bursts=%lu\n", bursts);
            fflush(stdout);
        }
    }
}

int main(void)
{
    report_listen();
    printf("ready\n");
    fflush(stdout);
    event_loop();
    return 0;
}
