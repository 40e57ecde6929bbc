/* Clocks (core/clock.c). */

#ifndef PPROF_AGENT_CLOCK_H
#define PPROF_AGENT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Seconds since the Unix epoch, in ns (clock.c). Async-signal-safe. */
int64_t agent_now_ns(void);
/* CLOCK_MONOTONIC in ns, for intervals (clock.c). Async-signal-safe. */
int64_t agent_mono_ns(void);
/* Time the agent loaded, in ns since the epoch (set by the constructor). */
extern int64_t agent_start_ns;

/* gmtime_r without the C library's time zone lock, which a fork child
 * would inherit held from the agent's thread (the server's Date header,
 * a dump's file name). Async-signal-safe. Does not allocate. */
struct tm *clock_gmtime_r(const time_t *t, struct tm *out);

#endif
