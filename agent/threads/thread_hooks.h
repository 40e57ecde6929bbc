/* Threads created (threads/thread_hooks.c). */

#ifndef PPROF_AGENT_THREAD_HOOKS_H
#define PPROF_AGENT_THREAD_HOOKS_H

#include <pthread.h>

struct stack_table;

/* Stacks that created threads: one counter (threads created). */
extern struct stack_table *threadcreate_table;
/* Number of host threads created since the agent loaded. */
extern long threads_created;

/* The next pthread_create (the C library's), resolved on first use. */
extern int (*next_pthread_create)(pthread_t *, const pthread_attr_t *,
                                  void *(*)(void *), void *);
/* Resolves the next_* pointers of this file. Not async-signal-safe. */
void thread_hooks_init(void);

/* The next thread the agent creates from this thread does not note its
 * stack in the agent's memory figures: the deferred start's thread, which
 * nearly every process started by hand creates and which most end before
 * it does anything (noting calls pthread_getattr_np, whose allocation on
 * the new thread makes glibc reserve a 128 MiB malloc arena for it). Not
 * async-signal-safe. Does not allocate. */
void thread_hooks_next_unnoted(void);

#endif
