/*
 * The execution trace's recorder: what every host thread did over a window
 * (waits, blocking calls, thread starts and exits, renames, the user's
 * tasks, regions and log messages), each with the stack where it happened,
 * kept in bounded per-thread chunks until encoder/trace.c turns them into
 * Go's execution-trace format.
 *
 * Contexts: the record functions run on host threads inside interposers
 * (lock_hooks.c, wait_hooks.c, futex_hooks.c, thread_hooks.c,
 * trace_hooks.c) and the public API, only while trace_on is set: a hook
 * tests that one global and pays nothing else. Start, stop, the walk over
 * the records and release run on one HTTP worker at a time (the slot is
 * taken by trace_start()).
 *
 * Memory: one reservation of PPROF_TRACE_MB (default 64 MiB), touched as
 * chunks are handed out, given back to the system (madvise) when the trace
 * is released; never unmapped, so that a late writer only ever writes into
 * the agent's own pages. A full reservation drops events and counts them;
 * no host thread ever waits for the recorder.
 */
#ifndef PPROF_TRACE_H
#define PPROF_TRACE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Set while a trace records. Read by every hook; written by start/stop. */
extern int trace_on __attribute__((visibility("hidden")));

/* What a record stands for. */
enum trace_kind {
    TRACE_SYNC = 1,  /* lock, semaphore, barrier, join, futex wait */
    TRACE_COND,      /* condition variable wait */
    TRACE_SYSCALL,   /* blocking call through the C library */
    TRACE_NET,       /* the same on a socket, or a poll/select/epoll wait */
    TRACE_SLEEP,     /* nanosleep, clock_nanosleep, sleep, usleep */
    TRACE_CREATE,    /* this thread created another (obj: its key) */
    TRACE_START,     /* this thread started (obj: key, peer: creator) */
    TRACE_EXIT,      /* this thread ends (text: its name) */
    TRACE_RENAME,    /* this thread was named (text: the name) */
    TRACE_TASK_BEGIN, /* obj: task id, peer: parent id, text: name */
    TRACE_TASK_END,   /* obj: task id */
    TRACE_REGION_BEGIN, /* obj: task id, text: name */
    TRACE_REGION_END,   /* obj: task id, text: name */
    TRACE_LOG,          /* obj: task id, text: key NUL value */
};

/* One record as kept in a chunk, followed by its pcs and its text. */
struct trace_rec {
    uint8_t kind;
    uint8_t depth;     /* stack entries after the header */
    uint16_t size;     /* bytes of the whole record, a multiple of 8 */
    uint32_t peer;     /* the thread that ended the wait (0: unknown) */
    int64_t t0, t1;    /* CLOCK_MONOTONIC ns; t0 == t1 for an instant */
    uint64_t obj;      /* the lock, the key or the task */
    uint16_t text_len; /* bytes of text after the pcs */
    uint16_t pad[3];
    uintptr_t pcs[];
};

/* Text kept per record at most (names, keys, values, log messages). */
#define TRACE_TEXT_MAX 256

/* CLOCK_MONOTONIC in ns, the trace's clock. Async-signal-safe. */
int64_t trace_clock(void);

/* Records an interval [t0, now] of kind on the calling thread, with the
 * caller's stack; peer: the thread that ended it, when known. Keeps errno.
 * Call only when trace_on was seen set. Does not allocate. */
void trace_interval(int kind, uint64_t obj, int64_t t0, uint32_t peer);

/* Records an instant of kind now, with the caller's stack and text (len
 * bytes, cut to TRACE_TEXT_MAX). Keeps errno. Does not allocate. */
void trace_instant(int kind, uint64_t obj, uint32_t peer, const char *text,
                   size_t len);

/* The thread holding a glibc mutex or the writer holding a rwlock now (0:
 * unknown), read from the C library's lock word: the unblocker a waiter
 * names. Reads only. */
uint32_t trace_lock_owner(const void *lock, int rwlock);

/* The kernel id of thread t while it runs (0: unknown or ended), read
 * from the C library's thread record at the offset trace_start() found
 * for its own thread: the thread whose end ends a join. Reads only. */
uint32_t trace_thread_tid(pthread_t t);

/* ---- the session (one HTTP worker) --------------------------------------- */

/* Starts recording: reserves the memory (once), sets trace_on. Returns 0,
 * -EBUSY when a trace runs, -ENOMEM. Not async-signal-safe. */
int trace_start(void);
/* Stops recording and waits for writers to leave. Not async-signal-safe. */
void trace_stop(void);
/* Makes the memory the running trace's writers will fill next present
 * ahead of them (see trace_rec.c). Called by the session's thread about
 * every 50 ms while a trace records. Not async-signal-safe. */
void trace_fill_ahead(void);
/* Gives the chunks' memory back and frees the slot. */
void trace_release(void);

/* Window of the last trace, CLOCK_MONOTONIC ns. */
extern int64_t trace_started_ns, trace_stopped_ns;
/* Records dropped because the memory was full, during the last trace. */
extern uint64_t trace_dropped;

/* Calls fn on every record of every thread, one thread at a time, in the
 * order the thread wrote them. Call between trace_stop() and
 * trace_release(). */
void trace_each(void (*fn)(void *arg, uint32_t tid, const struct trace_rec *r),
                void *arg);

/* Threads alive when the trace started, with their names then. */
struct trace_thread {
    uint32_t tid;
    char name[16];
    char state; /* as /proc shows it: R running, S or D waiting */
};
size_t trace_initial_threads(const struct trace_thread **out);

/* ---- the flight recorder (PPROF_TRACE_FLIGHT=SECONDS) -------------------- */

/* Reads PPROF_TRACE_MB and PPROF_TRACE_FLIGHT, and with the latter set
 * starts recording for good: the last SECONDS to 2 x SECONDS are kept
 * (two epochs of SECONDS, each in half of the memory). Called by the
 * constructor. Not async-signal-safe. */
void trace_init(void);
/* 1 when the flight recorder runs. */
int trace_flight_on(void);
/* Holds the recorder's epochs still (recording goes on) and sets the
 * window (trace_started_ns: since, or the oldest record kept; stopped:
 * now) for trace_each() and the encoder. Returns 0, -EBUSY (another
 * snapshot or trace is read), -ENOENT (no flight recorder). */
int trace_flight_take(int64_t since);
/* Lets the recorder move on after trace_flight_take(). */
void trace_flight_give(void);

/* A key that ties a thread's creation to its start. */
uint64_t trace_next_key(void);

/* Switches the blocking-call hooks (trace_hooks.c) to their traced twins
 * (on) or back to the real functions; set by trace_hooks.c's constructor,
 * called by trace_start() and trace_stop(). */
extern void (*trace_route)(int on);

/* Called on the calling thread after the program's wait, waitpid, wait3,
 * wait4 or waitid reported a child (trace_hooks.c); NULL: nothing. Set
 * by the process layer (process/role.c). Must be async-signal-safe and
 * leave errno alone: a signal handler reaps too. */
extern void (*trace_child_waited)(void);

/* The forked child starts with no trace (agent/fork.c). */
void trace_fork_child(void);

/* The value of call, timed as one record of kind on obj when a trace runs
 * (the test is the only cost otherwise). */
#define TRACE_CALL(kind, obj, call)                                            \
    ({                                                                         \
        __typeof__(call) r_;                                                   \
        if (__builtin_expect(trace_on, 0)) {                                   \
            int64_t t0_ = trace_clock();                                       \
            r_ = (call);                                                       \
            trace_interval((kind), (uint64_t)(obj), t0_, 0);                   \
        } else {                                                               \
            r_ = (call);                                                       \
        }                                                                      \
        r_;                                                                    \
    })

#endif
