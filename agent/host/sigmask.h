/* Signal masks (host/sigmask.c, host/sigmask_hooks.c). */

#ifndef PPROF_AGENT_SIGMASK_H
#define PPROF_AGENT_SIGMASK_H

#include "agent/spinlock.h"

#include <signal.h>

/*
 * The agent never sends its signals (the CPU profile's, the threads dump's)
 * to a thread that blocks them; see sigmask.c for the protocol between the
 * senders and the host's mask changes.
 */

/* Host threads inside an unwatched mask change; > 0 while a profile runs or
 * a dump asks; the lock that keeps a thread's change and a sender's look
 * at that thread apart. */
extern int sigmask_changing;
extern int sigmask_watched;
extern spinlock_t sigmask_lock;

/* The C library's pthread_sigmask, for the agent's own mask changes (which
 * must not go through the interposer). Async-signal-safe. */
int sigmask_real(int how, const sigset_t *set, sigset_t *old);

/* Begins/ends a period in which the agent may send signals to host
 * threads: from the beginning on, every host mask change takes
 * sigmask_lock. Begin waits for the changes already under way.
 * Not async-signal-safe. */
void sigmask_watch_begin(void);
void sigmask_watch_end(void);

/* 1 when thread tid blocks sig, 0 when it does not (its /proc status), -1
 * when that cannot be read (the thread is gone?). Call with sigmask_lock
 * held to send on the answer. Not async-signal-safe. */
int sigmask_thread_blocks(int tid, int sig);
/* 1 when sig is pending for thread tid itself (not process-wide).
 * Not async-signal-safe. */
int sigmask_thread_pending(int tid, int sig);
/* 1 when the calling thread blocks sig. Async-signal-safe. */
int sigmask_self_blocks(int sig);
/* In a forked child: forgets the parent's watchers and changers.
 * Not async-signal-safe. */
void sigmask_fork_child(void);

#endif
