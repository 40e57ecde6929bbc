/* The clock and the sleep every test program measures itself with. */
#ifndef TIMING_H
#define TIMING_H

#include <errno.h>
#include <time.h>

static inline long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Sleeps the whole time even when a signal interrupts it. */
static inline void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

#endif
