/* Wall-clock time for profiles' time_nanos and file names; the monotonic
 * clock for intervals; UTC calendar dates without the C library's time
 * zone lock (docs/fork.md). */
#include "agent/core/clock.h"

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

/* Days since 1970-01-01 to a civil date (proleptic Gregorian), by eras of
 * 400 years (146097 days) counted from 0000-03-01. */
static void civil_from_days(int64_t z, int *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;                                /* [0, 146096] */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);         /* [0, 365] */
    int64_t mp = (5 * doy + 2) / 153;                              /* [0, 11] */
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static int leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

struct tm *clock_gmtime_r(const time_t *t, struct tm *out)
{
    static const short before[12] = {0,   31,  59,  90,  120, 151,
                                     181, 212, 243, 273, 304, 334};
    int64_t s = (int64_t)*t;
    int64_t days = (s >= 0 ? s : s - 86399) / 86400;
    int64_t rem = s - days * 86400;
    int y, m, d;
    civil_from_days(days, &y, &m, &d);
    *out = (struct tm){0};
    out->tm_sec = (int)(rem % 60);
    out->tm_min = (int)(rem / 60 % 60);
    out->tm_hour = (int)(rem / 3600);
    out->tm_mday = d;
    out->tm_mon = m - 1;
    out->tm_year = y - 1900;
    out->tm_wday = (int)(((days % 7) + 11) % 7); /* 1970-01-01: Thursday */
    out->tm_yday = before[m - 1] + d - 1 + (m > 2 && leap(y));
    out->tm_zone = "GMT";
    return out;
}
