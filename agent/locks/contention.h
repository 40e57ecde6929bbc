/*
 * Contention profiles (block and mutex), shared by the lock interposers
 * (agent/locks/lock_hooks.c), the recorder (agent/locks/contention.c) and the
 * endpoints (http/contention.c).
 *
 * block: every time a host thread waits in a contended lock, a condition
 *   variable or a semaphore, the waiter's stack and how long it waited,
 *   sampled as Go's SetBlockProfileRate (PPROF_BLOCK_RATE, ns).
 * mutex: the delay waiters suffered on a mutex or rwlock, charged to the
 *   stack of the thread that unlocks while others wait (Go's attribution),
 *   sampled as Go's SetMutexProfileFraction (PPROF_MUTEX_FRACTION).
 *
 * Everything here runs inside interposed calls on the host's threads, never
 * in a signal handler. The uncontended path (lock_hooks.c) reads two
 * globals and one thread-local and never enters this file.
 */
#ifndef PPROF_CONTENTION_H
#define PPROF_CONTENTION_H

#include <stdint.h>

#include "agent/core/hash.h"
#include "agent/stacks/stack_table.h"

/* Block table counters: contentions in units of 1/CONTENTION_COUNT_SCALE
 * (Go's de-biased count is fractional: rate/wait for a short wait), and
 * delay in ns. */
#define CONTENTION_COUNT_SCALE 1000
/* Mutex table counters: sampled events and their delay in ns, not yet
 * multiplied by the fraction (the text form shows them raw, as Go). */
#define CONTENTION_VALUES 2

extern struct stack_table *block_table;
extern struct stack_table *mutex_table;

/* Non-zero when the hooks should measure (agent ready and at least one of
 * the two profiles on). Hidden in the declaration too, as
 * contention_waiters: read straight from their address, not through the
 * GOT (an instruction of each hook's fast path). Read on every lock call; written by
 * contention_init, and by the mutex lock hook from CONTENTION_ON_SINGLE to
 * CONTENTION_ON once the process has a second thread (lock_hooks.c). */
extern int contention_on __attribute__((visibility("hidden")));
#define CONTENTION_ON 1
/* On, and the process had one thread when the profiles were set up. */
#define CONTENTION_ON_SINGLE 2

/* Number of threads currently waiting on a mutex or rwlock anywhere in the
 * process. Every unlock reads it: 0 means nobody can be charged, which keeps
 * the uncontended unlock at one load. */
extern long contention_waiters __attribute__((visibility("hidden")));

/* The same for sampled futex waiters (agent/locks/futex_hooks.c): read by every
 * futex wake, kept apart so that a thread parked on a futex for hours (an
 * idle worker) does not send every pthread unlock down the slow path. */
extern long contention_futex_waiters;

/*
 * Where the followed waiters are: hint[slot of a lock's address] counts the
 * followed waiters (mutex, rwlock or futex) of the addresses that hash
 * there. An unlock or wake while somebody somewhere is followed reads its
 * own slot: zero means nobody it could be charged for waits on its address
 * (a multiply, a shift, one load and a compare), instead of looking for a
 * record. A slot shared with another followed address only costs that
 * look-up. Written in contention.c on arrival and leave only.
 */
#define CONTENTION_HINT_BITS 10
extern int contention_hint[1 << CONTENTION_HINT_BITS];

static inline int *contention_hint_slot(const void *lock)
{
    uint64_t h = (uint64_t)(uintptr_t)lock * HASH_GOLDEN;
    return &contention_hint[h >> (64 - CONTENTION_HINT_BITS)];
}

/* 1 when a followed waiter may wait on lock. Async-signal-safe. */
static inline int contention_followed(const void *lock)
{
    return __atomic_load_n(contention_hint_slot(lock), __ATOMIC_RELAXED) != 0;
}

/* 1 when somebody anywhere is followed and a followed waiter may wait on
 * lock: what an unlock, a hand-over and a condition wait test before
 * charging anyone (one load when nobody is followed). Async-signal-safe. */
static inline int contention_may_charge(const void *lock)
{
    return __atomic_load_n(&contention_waiters, __ATOMIC_RELAXED) != 0 &&
           contention_followed(lock);
}

/* Samples recorded and samples lost (table full, no record slot). */
extern long contention_lost;

/* Creates the tables when either profile is on and sets contention_on.
 * Called by the constructor after stack_init(). Not async-signal-safe. */
void contention_init(void);

/* What the mutex and block profiles must say of the waits they miss (""
 * when none): an attached agent's, from when its lock interposers are
 * bound (or that they could not be). Written by contention_unseen_set()
 * before the server starts, read by the profile writers.
 * Not async-signal-safe. */
extern char contention_unseen[400];
void contention_unseen_set(const char *why);

/* CLOCK_MONOTONIC in ns. Async-signal-safe. Does not allocate. */
int64_t contention_clock(void);

/* A cheap timestamp that only orders events across threads (the TSC on
 * x86-64, invariant on the CPUs glibc supports there): what an unlock reads
 * inside the host's critical section, where even clock_gettime cost 6-10%
 * of the contended benchmark. Async-signal-safe. Does not allocate. */
static inline uint64_t contention_stamp(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return (uint64_t)contention_clock();
#endif
}

/*
 * A waiter arrives at lock (a mutex or rwlock address) at time now: it
 * becomes one of the waiters whose delay the next unlocker is charged.
 * Returns a handle for contention_leave(), or NULL when no record could be
 * kept (the wait still reaches the block profile). Not async-signal-safe.
 * Does not allocate.
 */
void *contention_arrive(const void *lock, int64_t now);
/* The waiter of handle stops waiting at time now. Not async-signal-safe.
 * Does not allocate. */
void contention_leave(void *handle, int64_t now);
/* A waiter that was not sampled got lock while sampled waiters may still
 * wait: the delay they suffered so far is owed to the previous holder.
 * Not async-signal-safe. Does not allocate. */
void contention_handover(const void *lock);

/*
 * Records one wait of ns nanoseconds in the block profile, with the
 * caller's stack, sampled as Go's block profile rate. Called with the
 * guard not entered. Not async-signal-safe.
 */
void contention_block_event(int64_t ns);

/*
 * The delay that lock's waiters accumulated since the last charge, taken
 * (and zeroed) by the thread that just unlocked it. Fills *delay and *count
 * (waiters concerned) and returns 1 when this charge is sampled for the
 * mutex profile (then call contention_mutex_event() with the values, which
 * may have been reweighted: contention_charge_sample()), 0 otherwise. Called
 * after the real unlock, so that nothing lengthens the critical section,
 * with unlocked_at = contention_stamp() read just before it: a waiter that took the lock over
 * (and may unlock and be charged first) then gets only what accrued after
 * the hand-over. lock is only a key, never dereferenced. Not async-signal-safe. Does not
 * allocate.
 */
int contention_charge(const void *lock, uint64_t unlocked_at, int64_t *delay,
                      int64_t *count);
/* Whether a charge of *delay ns for *count waiters is recorded: always
 * from 100 us up, else with probability delay / 100 us, then reweighted in
 * place so that the expected totals are the true ones. Used by
 * contention_charge(). Not async-signal-safe (per-thread random state).
 * Does not allocate. */
int contention_charge_sample(int64_t *delay, int64_t *count);
/* Records a sampled charge with the caller's stack. Not async-signal-safe. */
void contention_mutex_event(int64_t delay, int64_t count);

/* Futex waiters: as contention_arrive() and contention_leave(), counted in
 * contention_futex_waiters. uaddr is only a key. Not async-signal-safe.
 * Does not allocate. */
void *contention_futex_arrive(const void *uaddr, int64_t now);
void contention_futex_leave(void *handle, int64_t now);

/* Keys of the mutex table's entries: what kind of release was charged.
 * A futex wake may end a lock wait or a condition wait (notify, unpark,
 * one-time initialization); the profile tells them apart when it is
 * written (http/contention.c), from the waker's function names. */
#define CONTENTION_KEY_LOCK 0
#define CONTENTION_KEY_FUTEX_WAKE 1

/* As contention_mutex_event(), under key. Not async-signal-safe. */
void contention_mutex_event_key(int64_t delay, int64_t count, uint64_t key);

/* Resolves the real_* functions of wait_hooks.c and futex_hooks.c
 * (idempotent). Not async-signal-safe. */
void wait_hooks_init(void);
void futex_hooks_init(void);

/* Resolves the real_* functions of lock_hooks.c (idempotent).
 * Not async-signal-safe. */
void lock_hooks_init(void);

/* cond_version.c: 1 when the object containing pc binds pthread_cond_wait
 * and pthread_cond_timedwait at the old GLIBC_2.2.5 version, 0 otherwise
 * (the current one; also the answer when the object has no such
 * reference, e.g. a call through a pointer). Not async-signal-safe. */
int cond_version_old(uintptr_t pc);

#endif
