/* Wall-clock time for profiles' time_nanos and file names; the monotonic
 * clock for intervals. */
#include "agent/clock.h"

#include <time.h>

int64_t agent_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t agent_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Set by the constructor (process/init.c); read by /debug/stats. */
int64_t agent_start_ns;
