/* Whether a CPU profile is running: the agent installs its handler on
 * SIGPROF for the length of a profile (when the program leaves SIGPROF to
 * it). Read with the raw system call: the agent answers a program's own
 * sigaction with the program's action, not its own. */
#ifndef PROFILING_BEGAN_H
#define PROFILING_BEGAN_H

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "timing.h"

static inline int sigprof_handled(void)
{
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long mask;
    } k;
    if (syscall(SYS_rt_sigaction, SIGPROF, NULL, &k, 8) != 0)
        return 0;
    return k.handler != SIG_DFL && k.handler != SIG_IGN;
}

/* Waits until a CPU profile runs, at most max_ms; 1 once it does. */
static inline int wait_profiling(long max_ms)
{
    for (long waited = 0; waited < max_ms; waited += 5) {
        if (sigprof_handled())
            return 1;
        sleep_us(5000);
    }
    return sigprof_handled();
}

#endif
