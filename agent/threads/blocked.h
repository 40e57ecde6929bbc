/*
 * Blocked-call notes: where a host thread entered a blocking call the agent
 * interposes, noted by the thread itself (agent/threads/blocked_notes.c).
 *
 * Why: a process that changed its user (a server that drops root) is not
 * dumpable, and its /proc/self/task/TID/syscall files (mode 0400) are then
 * root's: the agent, running as the new user, cannot learn where a blocked
 * thread waits, and a signal could cut its call short (EINTR). Its own
 * interposers can: a hook that is about to block (a poll, a read, a
 * condition wait, a contended mutex, a futex wait) notes its caller's
 * frame (return address, stack pointer, frame pointer) in the thread's
 * slot, and clears it when the call returns. A look that finds the thread
 * sleeping with a note open walks its stack from there, from a copy
 * (threads_walk_noted, agent/threads/threads.h), no signal sent.
 *
 * Noting is on only once the process is not dumpable (blocked_notes_check:
 * after an ID change, PR_SET_DUMPABLE, or when a look finds the syscall
 * file unreadable); before that the hooks pay one load of a flag. A thread
 * already blocked when noting began has no note until it waits again.
 *
 * The slot is a sequence lock with one writer, the thread itself: its count
 * is 0 mod 4 outside a noted call, 1 while the note is written, 2 inside;
 * a nested hook (a signal handler's write inside a noted read) leaves the
 * outer note alone. Async-signal-safe: enter and leave are a few stores.
 */
#ifndef PPROF_AGENT_BLOCKED_H
#define PPROF_AGENT_BLOCKED_H

#include "agent/compiler.h"

#include <stdint.h>

/* What a reader copies out of a slot. */
struct blocked_note {
    uint32_t seq;   /* the slot's count when read (2 mod 4) */
    long nr;        /* the system call the hooked call makes (a label) */
    uintptr_t fn;   /* the real function called (the stack's leaf) */
    uintptr_t ret;  /* the hook's return address */
    uintptr_t cfa;  /* the stack pointer at that return */
    uintptr_t fp;   /* the frame pointer there */
};

/* Set once the process is not dumpable (read by every noting hook). */
extern int blocked_notes_on;

/* Called when noting starts (the trace hooks' routes follow). */
extern void (*blocked_notes_reroute)(void);

/*
 * Opens the calling thread's note: frame is the noting function's own
 * __builtin_frame_address(0) (its record: saved frame pointer, return
 * address), fn the real function about to be called, nr its system call.
 * Returns 1 when it opened one (pass it to blocked_leave), 0 when it did
 * not (nested, an agent thread, no slot free). Async-signal-safe.
 */
int blocked_enter(long nr, uintptr_t fn, const void *frame);
void blocked_leave(void);

#define BLOCKED_ENTER(nr, fn)                                                  \
    (unlikely(__atomic_load_n(&blocked_notes_on, __ATOMIC_RELAXED))            \
         ? blocked_enter((nr), (uintptr_t)(fn), __builtin_frame_address(0))    \
         : 0)
#define BLOCKED_LEAVE(opened)                                                  \
    do {                                                                       \
        if (opened)                                                            \
            blocked_leave();                                                   \
    } while (0)

/* Turns noting on when the process is not dumpable and not root (two
 * system calls). Returns 1 when it is on. Async-signal-safe. */
int blocked_notes_check(void);
/* Turns it on (a look found a syscall file unreadable). */
void blocked_notes_switch_on(void);

/* Thread tid's open note into *out: 1 when it is inside a noted call, 0
 * when not (or it has no slot). Any thread. */
int blocked_note_read(int tid, struct blocked_note *out);
/* The note's count now (for a reader checking it did not move). */
uint32_t blocked_note_seq(int tid);

/* The calling thread ends: its slot is given back. */
void blocked_thread_exiting(void);
/* In a fork child: every slot is the parent's (flags only). */
void blocked_notes_fork_child(void);

#endif
