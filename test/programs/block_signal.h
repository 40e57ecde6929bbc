/*
 * For the worker test programs: a signal kept pending for a later
 * sigwait (SIGTERM to end, SIGUSR1 to go on).
 */
#ifndef PPROF_TEST_BLOCK_SIGNAL_H
#define PPROF_TEST_BLOCK_SIGNAL_H

#include <signal.h>

/* Blocks sig in the calling thread (and the threads and children it
 * makes after); returns the set that holds only sig, for sigwait. */
static sigset_t block_signal(int sig)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_BLOCK, &set, NULL);
    return set;
}

#endif
