/*
 * The agent's own waits on condition variables (its threads', civetweb's)
 * call the C library's current pthread_cond_wait and
 * pthread_cond_timedwait, by version.
 *
 * The agent defines these names (its interposers), so the linker leaves
 * the agent's own calls unversioned. Preloaded, the agent's definition is
 * first in the lookup and takes them (its threads forward to the C
 * library's). Loaded later by dlopen (pprof-attach), the C library comes
 * first, and an unversioned reference binds its oldest version: x86_64's
 * GLIBC_2.2.5 compatibility condition variables, whose waits never see a
 * wakeup from the current pthread_cond_signal (civetweb's workers then
 * never took a connection). A versioned reference binds the agent's own
 * unversioned definition when preloaded, as before, and the C library's
 * GLIBC_2.3.2 when dlopen'd.
 *
 * Included by the files that wait on a condition variable and by
 * civetweb's compile (-include); never by the files that define the
 * interposers.
 */
#ifndef PPROF_AGENT_COND_CALLS_H
#define PPROF_AGENT_COND_CALLS_H

#if defined(__x86_64__)
__asm__(".symver pthread_cond_wait,pthread_cond_wait@GLIBC_2.3.2");
__asm__(".symver pthread_cond_timedwait,pthread_cond_timedwait@GLIBC_2.3.2");
#endif

#endif
