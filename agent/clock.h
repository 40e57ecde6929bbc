/* Clocks (core/clock.c). */

#ifndef PPROF_AGENT_CLOCK_H
#define PPROF_AGENT_CLOCK_H

#include <stdint.h>

/* Seconds since the Unix epoch, in ns (clock.c). Async-signal-safe. */
int64_t agent_now_ns(void);
/* CLOCK_MONOTONIC in ns, for intervals (clock.c). Async-signal-safe. */
int64_t agent_mono_ns(void);
/* Time the agent loaded, in ns since the epoch (set by the constructor). */
extern int64_t agent_start_ns;

#endif
