/*
 * The threads profile (/debug/pprof/goroutine): every host thread of the
 * process now, with its name, state and stack. Owned by agent/threads/threads.c
 * (listing /proc/self/task, asking each thread for its stack, waiting) and
 * agent/threads/threads_signal.c (the handler that answers, and nothing else).
 *
 * How a stack is taken: the HTTP worker sends each thread a real-time
 * signal (rt_tgsigqueueinfo, carrying the request's generation and the
 * thread's slot number); the thread's handler unwinds its own interrupted
 * context with libunwind, as the CPU sampler does, into that slot of a
 * preallocated array; the worker waits at most THREADS_WAIT_MS for all
 * answers. A thread that does not answer is still listed with its name,
 * state and what /proc tells (the system call it is blocked in).
 *
 * A thread is only interrupted when that cannot change what the host
 * sees: running, or blocked in a system call that the kernel restarts after
 * a handler (SA_RESTART). A thread blocked in one that would return EINTR
 * (poll, epoll_wait, nanosleep, timed futex waits, socket calls with a
 * timeout), or that blocks the signal, is walked by the worker itself from
 * a copy of its stack (threads.c, cfi_walk_copy), never signalled.
 * See threads.c for the list. In a process that is not dumpable (no
 * syscall file to read), a sleeping thread is walked from its hook's note
 * (agent/threads/blocked.h) and a thread stat shows running is asked.
 */
#ifndef PPROF_THREADS_H
#define PPROF_THREADS_H

#include "agent/host/signals.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define THREADS_STACK_MAX 64
#define THREADS_WAIT_MS 200

/* Why a thread has no full stack. */
enum thread_stack_status {
    THREAD_STACK_OK,         /* unwound by its own handler */
    THREAD_STACK_EINTR,      /* blocked where a handler would cause EINTR */
    THREAD_STACK_BLOCKED,    /* the thread blocks the signal */
    THREAD_STACK_STOPPED,    /* stopped, traced or exiting */
    THREAD_STACK_NO_ANSWER,  /* no answer within THREADS_WAIT_MS */
    THREAD_STACK_NO_SIGNAL,  /* no signal free, or it could not be sent */
    THREAD_STACK_MOVED,      /* blocked, but moved twice while its stack
                                was copied */
    THREAD_STACK_UNREADABLE, /* blocked, but its stack could not be read */
    THREAD_STACK_NO_PROC,    /* its /proc syscall file cannot be read (a
                                process that is not dumpable) */
    THREAD_STACK_NOT_NOTED,  /* not dumpable, and blocked outside the
                                calls whose hooks note where they wait */
};

struct thread_info {
    int tid;
    char name[16];
    char state;         /* /proc state letter: R, S, D, T, t, Z ... */
    long syscall;       /* blocked in this system call; -1: none/unknown */
    int status;         /* enum thread_stack_status */
    uint32_t labels;    /* label set id (agent/core/labels.h), 0: none/unknown */
    int depth;
    uintptr_t pcs[THREADS_STACK_MAX]; /* leaf first; leaf exact, ra - 1 */
};

struct thread_dump {
    struct thread_info *threads; /* sorted by tid */
    size_t n;
    size_t agent_threads; /* the agent's own threads, not listed */
    int signo;            /* the signal used, 0 when none */
    size_t walked;        /* blocked threads walked from a copy, unsignalled */
    uint64_t fp_found;    /* their frames whose frame pointer was found */
    uint64_t fp_lost;     /* their walks that ended for want of one */
    int undumpable;       /* the /proc syscall files could not be read */
    size_t noted;         /* blocked threads walked from their notes */
    size_t not_noted;     /* blocked threads without a note */
    int64_t time_ns;      /* when the dump was taken */
    int64_t patience_end_ns; /* extra tries of moving threads end then */
};

/* Lists every host thread and takes its stack (at most THREADS_WAIT_MS).
 * One dump at a time (callers wait for each other). Returns 0 or -ENOMEM.
 * Not async-signal-safe; HTTP workers only. */
int threads_dump(struct thread_dump *out);
void threads_dump_free(struct thread_dump *d);

/* In a forked child: frees the dump lock and gives back the borrowed
 * signal if a worker of the parent was dumping at the fork. Not
 * async-signal-safe. */
void threads_fork_child(void);

/* The signal the dump under way asks with, 0 between dumps. Written by
 * the dumping worker and read by the mask interposers, both under
 * sigmask_lock (agent/host/sigmask.h). */
extern int threads_signo;

/* Number of host threads now (the agent's own not counted).
 * Not async-signal-safe. */
long threads_host_count(void);

/* ---- reading a thread from /proc, without a signal ------------------------
 * (threads.c; also used by the wall profile, agent/wall/wall_look.c) */

/* What /proc/self/task/TID/syscall says. */
struct thread_syscall {
    long nr;            /* -1: running (not in a system call); -2: unread */
    unsigned long args[6];
    uintptr_t sp;       /* user stack pointer in the call; 0: unknown */
    uintptr_t pc;       /* user address the call returns to; 0: unknown */
    char line[256];     /* the file as read, for the consistency check */
};

/* Parses /proc/self/task/TID/syscall: "running", or "-1 sp pc" (blocked
 * outside a system call), or "nr a0 .. a5 sp pc". Returns 0 or -1 (the
 * thread is gone). Not async-signal-safe. */
int threads_read_syscall(int tid, struct thread_syscall *st);

/* The same through the threads folder *tasks_fd holds open
 * (proc_task_read: cheaper for a reader of many threads many times a
 * second); by path when tasks_fd is NULL or *tasks_fd < 0. */
int threads_read_syscall_at(const int *tasks_fd, int tid,
                            struct thread_syscall *st);

/* Bytes of a blocked thread's stack copied for its walk, at most. */
#define THREADS_COPY_MAX (256 * 1024)

/* Thread tid's CPU time (its CPU clock, one clock_gettime), ns, or -1 when
 * it is gone. Does not allocate. Async-signal-safe. */
int64_t threads_cpu_ns(int tid);

struct blocked_note;

/* Walks thread tid, blocked inside the noted call n (agent/threads/blocked.h,
 * read after cpu_before, its CPU time: -1 reads it now) describes, from a
 * copy of its stack from the note's stack pointer: the copy is kept when
 * the thread did not run meanwhile (its CPU time) and the note is the same.
 * pcs: the real function called (leaf), then the call sites above the
 * hook, the agent's frames left out. No signal is sent, no /proc read.
 * Returns THREAD_STACK_OK, THREAD_STACK_MOVED or THREAD_STACK_UNREADABLE.
 * Not async-signal-safe. */
int threads_walk_noted(const struct blocked_note *n, int tid,
                       int64_t cpu_before, void *copy, uintptr_t *pcs,
                       int max, int *depth);

/* Walks thread tid, blocked in the system call st describes (nr >= 0, sp
 * and pc known), from a copy of its stack made in copy (THREADS_COPY_MAX
 * bytes, the caller's): copies, makes sure the thread has not moved since
 * st was read (its CPU time is still cpu_before, taken before st was
 * read; else, or when cpu_before is -1, by reading st again with
 * threads_read_syscall_at and tasks_fd) and walks, else tries once more
 * with the new line (st updated). No signal is sent. Returns
 * THREAD_STACK_OK with *depth frames in pcs (leaf as /proc gives it,
 * callers ra - 1, the agent's frames between host frames left out), or
 * THREAD_STACK_MOVED / THREAD_STACK_UNREADABLE.
 * Not async-signal-safe. */
int threads_walk_blocked(const int *tasks_fd, int tid,
                         struct thread_syscall *st, int64_t cpu_before,
                         void *copy, uintptr_t *pcs, int max, int *depth);

/* Host thread ids now (the agent's own left out, counted in *agent), in
 * the order /proc lists them. Returns a malloc'd array of *n, or NULL.
 * Not async-signal-safe. */
int *threads_list_tids(size_t *n, size_t *agent);

/* Human-readable state ("sleeping", "running", ...) of a /proc state letter
 * and name of a system call number ("futex", NULL when not in the table).
 * Async-signal-safe. */
const char *threads_state_name(char state);
const char *threads_syscall_name(long nr);

/* ---- signal side (threads_signal.c) -------------------------------------- */

/* One thread's answer. `word` is (generation << 2) | state: the worker
 * writes ASKED before sending; the handler moves ASKED -> WRITING with a
 * CAS, fills the slot, then stores DONE (release); after the wait the
 * worker moves ASKED -> IDLE with a CAS, so a late handler finds nothing
 * to write. Slots live in memory that is never unmapped. */
enum { SLOT_IDLE, SLOT_ASKED, SLOT_WRITING, SLOT_DONE };
struct thread_slot {
    uint64_t word;
    uint32_t depth;
    uint32_t labels;
    uintptr_t pcs[THREADS_STACK_MAX];
};

/* The current request's slots (written by the worker before any signal is
 * sent, read by handlers). */
extern struct thread_slot *threads_slots;
extern uint32_t threads_nslots;

/* si_value of a request: cookie, 16-bit generation, 32-bit slot index. */
static inline uint64_t threads_value(uint32_t gen, uint32_t slot)
{
    return (THREADS_COOKIE << 48) | ((uint64_t)(gen & 0xffff) << 32) | slot;
}

/* The handler, for sigaction (SA_SIGINFO). Async-signal-safe. */
void threads_signal_handler(int sig, siginfo_t *si, void *uc);

#endif
