/*
 * Deadlocks and stuck threads (/debug/pprof/deadlock, the watch): the
 * contract between the lock interposers that note who waits for what
 * (agent/locks/lock_hooks.c, futex_hooks.c), the look that turns those
 * notes, the locks' own owner fields and /proc into cycles and stuck
 * chains (agent/locks/deadlock.c), the watch that says so once on stderr
 * (agent/locks/deadlock_watch.c), the text and profile writer
 * (encoder/deadlock.c), the route (http/deadlock.c) and the shell's
 * dumps (process/watch.c). docs/deadlock.md explains what is seen.
 */
#ifndef PPROF_DEADLOCK_H
#define PPROF_DEADLOCK_H

#include <stddef.h>
#include <stdint.h>


/* What a noted wait waits for: the owner of each is read differently. */
enum {
    DEADLOCK_MUTEX = 1, /* pthread_mutex_t: __data.__owner */
    DEADLOCK_RWLOCK,    /* pthread_rwlock_t: __data.__cur_writer */
    DEADLOCK_FUTEX_PI,  /* a PI futex word: its low 30 bits */
    DEADLOCK_FUTEX,     /* a futex word: no owner known */
};

/*
 * One noted wait per host thread that ever waited on a followed lock: the
 * thread's id, and while it waits the lock and since when. Written only by
 * that thread (deadlock_wait_begin, deadlock_wait_end), read by the look
 * on the agent's threads: lock is stored last (release) and read first and
 * again after since (acquire), so a reader never pairs one wait's lock with
 * another's start.
 */
struct deadlock_slot {
    int tid;
    int kind;
    const void *lock; /* NULL while the thread does not wait */
    int64_t since;    /* CLOCK_MONOTONIC ns (contention_clock) */
} __attribute__((aligned(32)));

/* The calling thread starts waiting on lock (kind as above) at now: its
 * slot is taken on its first wait (one search; none left: not noted).
 * Returns the slot for deadlock_wait_end, or NULL. On the contended path
 * of an interposer only (syscall()'s may run in a host's signal handler:
 * it takes no lock). Async-signal-safe. Does not allocate. */
struct deadlock_slot *deadlock_wait_begin(const void *lock, int kind,
                                          int64_t now);
/* The wait noted in slot (NULL: none) is over. Async-signal-safe. */
static inline void deadlock_wait_end(struct deadlock_slot *slot)
{
    if (slot)
        __atomic_store_n(&slot->lock, NULL, __ATOMIC_RELEASE);
}

/* ---- the look (deadlock.c) ----------------------------------------------- */

#define DEADLOCK_STACK_MAX 64

/* One thread of a cycle or a chain. */
struct deadlock_thread {
    int tid;
    char name[16];
    char state;          /* /proc state letter */
    long syscall;        /* blocked in this system call; -1: none/unknown */
    int kind;            /* what it waits for (DEADLOCK_*), 0: not a lock */
    const void *lock;    /* the lock it waits for, or NULL */
    int held_by;         /* that lock's holder (tid), 0: none */
    int64_t blocked_ns;  /* how long it has waited for lock; 0: unknown */
    uintptr_t waits_in;  /* the first frame outside the C library and the
                            agent (the host's function), 0: unknown */
    int depth;           /* its stack, leaf first; 0: could not be taken */
    uintptr_t pcs[DEADLOCK_STACK_MAX];
};

enum { DEADLOCK_CYCLE = 1, DEADLOCK_CHAIN };

/* A cycle (each thread waits for a lock the next holds, the last's held
 * by the first) or a chain (each waits for the next; the last, the
 * holder, is blocked elsewhere: threads[n - 1].kind is 0). */
struct deadlock_group {
    int type;
    size_t n;
    struct deadlock_thread *threads;
};

struct deadlock_report {
    struct deadlock_group *groups;
    size_t n;
    int64_t min_ns;   /* waits shorter than this were left out */
    int64_t time_ns;  /* when it was taken (epoch ns) */
    size_t waiting;   /* threads noted waiting on a followed lock now */
    long slots_lost;  /* threads that found no slot (never noted) */
};

/* Every cycle and every stuck chain whose waits have all lasted at least
 * min_ns, with the stacks of their threads (walked from /proc, no
 * signal). One look at a time (callers wait for each other). Returns 0 or
 * -ENOMEM. Agent threads only. Not async-signal-safe. */
int deadlock_look(int64_t min_ns, struct deadlock_report *out);
void deadlock_report_free(struct deadlock_report *r);

/* A 64-bit identity of a cycle (its threads and locks, in any rotation).
 * Does not allocate. */
uint64_t deadlock_cycle_key(const struct deadlock_group *g);

/* Threads noted waiting now for a lock that names its holder (a plain
 * futex wait does not), and the longest of those waits at now
 * (contention_clock), ns: a pass over the slots in use, what the watch
 * pays when nothing waits long. Does not allocate. */
size_t deadlock_waiting(void);
int64_t deadlock_longest_wait(int64_t now);

/* ---- the watch (deadlock_watch.c) ----------------------------------------- */

/* One look of the watch (every opt_deadlock_seconds is the threshold):
 * nothing when no noted wait has lasted that long (a pass over the slots
 * in use); otherwise a look, and for each cycle not seen before one line
 * on stderr naming its threads and the functions they wait in. Returns 1
 * with the report in *out (the caller frees it) when a new cycle formed,
 * 0 otherwise. Agent threads only. Not async-signal-safe. */
int deadlock_watch_tick(struct deadlock_report *out);

/* PPROF_DEADLOCK_SECONDS: the watch's threshold; 0: no watch. */
extern long opt_deadlock_seconds;

#endif
