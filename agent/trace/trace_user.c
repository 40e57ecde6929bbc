/*
 * The execution trace's user annotations (pprofagent.h): tasks, regions
 * and log messages, as Go's runtime/trace, recorded with the caller's
 * stack while a trace runs (agent/trace/trace_rec.c).
 *
 * Entered on any host thread. With no trace running a call is one load
 * and a return (a task still gets its id, so that a task begun before a
 * trace can end inside one). Strings are copied into the record, cut to
 * TRACE_TEXT_MAX bytes. Never allocates.
 */
#include "agent/trace/trace.h"

#include "agent/compiler.h"
#include "agent/config.h"
#define PPROF_AGENT_BUILD
#include "agent/pprofagent.h"

#include <string.h>

static unsigned long long next_task;

static size_t text_len(const char *s)
{
    return s ? strnlen(s, TRACE_TEXT_MAX) : 0;
}

unsigned long long pprof_agent_trace_task_begin(unsigned long long parent,
                                                const char *type)
{
    if (!opt_enable)
        return 0;
    unsigned long long id = __atomic_add_fetch(&next_task, 1, __ATOMIC_RELAXED);
    if (unlikely(trace_on))
        trace_instant(TRACE_TASK_BEGIN, id, (uint32_t)parent, type,
                      text_len(type));
    return id;
}

void pprof_agent_trace_task_end(unsigned long long task)
{
    if (unlikely(trace_on))
        trace_instant(TRACE_TASK_END, task, 0, NULL, 0);
}

void pprof_agent_trace_region(unsigned long long task, const char *type,
                              int end)
{
    if (unlikely(trace_on))
        trace_instant(end ? TRACE_REGION_END : TRACE_REGION_BEGIN, task, 0,
                      type, text_len(type));
}

void pprof_agent_trace_log(unsigned long long task, const char *category,
                           const char *message)
{
    if (!unlikely(trace_on))
        return;
    /* "category NUL message" in one record. */
    char text[TRACE_TEXT_MAX];
    size_t k = text_len(category);
    if (k > TRACE_TEXT_MAX / 4)
        k = TRACE_TEXT_MAX / 4;
    memcpy(text, category ? category : "", k);
    text[k] = 0;
    size_t m = text_len(message);
    if (m > TRACE_TEXT_MAX - k - 1)
        m = TRACE_TEXT_MAX - k - 1;
    memcpy(text + k + 1, message ? message : "", m);
    trace_instant(TRACE_LOG, task, 0, text, k + 1 + m);
}

int pprof_agent_trace_enabled(void)
{
    return __atomic_load_n(&trace_on, __ATOMIC_RELAXED);
}
