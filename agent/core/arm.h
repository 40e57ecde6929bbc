/* The deferred start's trigger (core/arm.c). */

#ifndef PPROF_AGENT_ARM_H
#define PPROF_AGENT_ARM_H

#include "agent/compiler.h"

#include <stdint.h>

/*
 * A forked child under the agent starts nothing at the fork: the start is
 * armed, and the child's own calls fire it once they show that it lives
 * on. A call that waits for an event (epoll_wait, a condition, a join,
 * pthread_create, poll, accept, a sleep) fires it at once, and the
 * agent's thread then waits out the rest of the start delay; a call that
 * only works (read, write, a sampled allocation) or waits for its own
 * children (a subshell's pipeline) fires it once the delay has passed. A
 * child that execs or exits before either never creates a thread.
 */
enum arm_kind {
    ARM_WAIT, /* fires at once */
    ARM_LATE, /* fires once the deadline passed */
    ARM_NONE, /* does not fire (a call that will not wait) */
};

/* Non-zero while a start is armed in this process (or taken, arm_take).
 * Written atomically by arm_set, arm_door and arm_take, read by the
 * doors. */
extern int arm_armed;

/* Arms the start: fire() runs once, on the host thread whose call fired
 * it, with the guard entered, in process pid only. Does not allocate, no
 * system call. */
void arm_set(void (*fire)(void), int64_t deadline_mono_ns, int pid);
/* Disarms (a fork child, before its own arm). Async-signal-safe. */
void arm_clear(void);
/* Returns 1 when a start was armed in this process, which the caller
 * then does itself (a child about to forbid new threads), telling
 * arm_taken_done when it is done; meanwhile the start is neither armed
 * nor fired, and arm_wait_taken in another thread of the process waits
 * for it (5 s at most). Not async-signal-safe. */
int arm_take(void);
void arm_taken_done(void);
void arm_wait_taken(void);
/* The routes of the doors that jump through a pointer (trace_hooks.c):
 * called with 1 when armed, 0 when disarmed. */
extern void (*arm_reroute)(int armed);

/* What an armed door does. signal_safe: the door is a function a signal
 * handler may call (read, write, poll, sleep...): then it fires only
 * when the calling thread blocks no signal (a handler runs with its
 * signal blocked), tried at most every 10 ms. Not async-signal-safe
 * when it fires; otherwise it returns at once. */
void arm_door(enum arm_kind kind, int signal_safe);

/* A door's check: one load while disarmed. errno is kept. */
static inline void arm_poke(enum arm_kind kind, int signal_safe)
{
    if (unlikely(__atomic_load_n(&arm_armed, __ATOMIC_RELAXED)))
        arm_door(kind, signal_safe);
}

#endif
