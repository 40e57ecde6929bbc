/*
 * The push's counters (agent/core/push.h): kept in the recording layer so that
 * the pages that show them (http/stats.c, http/index.c) and the thread
 * that updates them (process/push.c) each reach them from their side.
 */
#include "agent/core/push.h"

struct push_counters push_counters;
