/*
 * Interposers of the C library's other blocking waits, beside the ones in
 * agent/locks/lock_hooks.c: the clock-selecting variants that C++'s timed waits
 * use (pthread_mutex_clocklock, pthread_rwlock_clock*lock,
 * pthread_cond_clockwait, sem_clockwait: std::timed_mutex,
 * std::shared_timed_mutex, std::condition_variable::wait_for/_until with
 * steady_clock, std::counting_semaphore before C++20's atomic waits), and
 * the waits that are not locks (pthread_barrier_wait, pthread_join and its
 * timed forms, pthread_spin_lock).
 *
 * Entered on every host thread. A lock tries the real try-lock first and
 * only on EBUSY takes timestamps; the others are timed around the real call
 * (two vDSO clock reads), which is small beside a call that may block.
 * Locks register their sampled waiters as lock_hooks.c does, so that the
 * unlock (interposed there) charges the holder; the rest reach the block
 * profile only (no holder to charge: Go's block profile counts a
 * WaitGroup's or a channel's waits the same way).
 *
 * Never changes what the host sees: the same return values and errno, the
 * same blocking; the agent's own threads and calls made with the guard
 * entered are only forwarded.
 */
#include "agent/threads/blocked.h"
#include "agent/compiler.h"
#include "agent/locks/contention.h"
#include "agent/guard.h"
#include "agent/core/next_symbol.h"
#include "agent/trace/trace.h"
#include "agent/core/arm.h"

#include <errno.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <time.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*mutex_fn)(pthread_mutex_t *);
typedef int (*mutex_clock_fn)(pthread_mutex_t *, clockid_t,
                              const struct timespec *);
typedef int (*rwlock_fn)(pthread_rwlock_t *);
typedef int (*rwlock_clock_fn)(pthread_rwlock_t *, clockid_t,
                               const struct timespec *);
typedef int (*cond_clock_fn)(pthread_cond_t *, pthread_mutex_t *, clockid_t,
                             const struct timespec *);
typedef int (*sem_fn)(sem_t *);
typedef int (*sem_clock_fn)(sem_t *, clockid_t, const struct timespec *);
typedef int (*barrier_fn)(pthread_barrier_t *);
typedef int (*join_fn)(pthread_t, void **);
typedef int (*join_timed_fn)(pthread_t, void **, const struct timespec *);
typedef int (*join_clock_fn)(pthread_t, void **, clockid_t,
                             const struct timespec *);
typedef int (*spin_fn)(pthread_spinlock_t *);

static mutex_fn real_mutex_trylock;
static mutex_clock_fn real_mutex_clocklock;
/* A read-write lock's clock waits: a read and a write kind, alike but for
 * the real functions they forward to. */
enum { RW_READ, RW_WRITE };
static struct {
    const char *trylock, *clocklock; /* their names */
    rwlock_fn real_trylock;
    rwlock_clock_fn real_clocklock;
} rw[2] = {
    [RW_READ] = {"pthread_rwlock_tryrdlock", "pthread_rwlock_clockrdlock"},
    [RW_WRITE] = {"pthread_rwlock_trywrlock", "pthread_rwlock_clockwrlock"},
};
static cond_clock_fn real_cond_clockwait;
static sem_fn real_sem_trywait;
static sem_clock_fn real_sem_clockwait;
static barrier_fn real_barrier_wait;
static join_fn real_join;
static join_timed_fn real_timedjoin;
static join_clock_fn real_clockjoin;
static spin_fn real_spin_lock, real_spin_trylock;
/* Set last by wait_hooks_init(): the others are valid once it is. */
static int resolved;

static void *next(const char *name)
{
    return next_symbol(name);
}

void wait_hooks_init(void)
{
    if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE))
        return;
    guard_enter_lookup();
    real_mutex_trylock = next("pthread_mutex_trylock");
    real_mutex_clocklock = next("pthread_mutex_clocklock");
    for (int k = RW_READ; k <= RW_WRITE; k++) {
        rw[k].real_trylock = next(rw[k].trylock);
        rw[k].real_clocklock = next(rw[k].clocklock);
    }
    real_cond_clockwait = next("pthread_cond_clockwait");
    real_sem_trywait = next("sem_trywait");
    real_sem_clockwait = next("sem_clockwait");
    real_barrier_wait = next("pthread_barrier_wait");
    real_join = next("pthread_join");
    real_timedjoin = next("pthread_timedjoin_np");
    real_clockjoin = next("pthread_clockjoin_np");
    real_spin_lock = next("pthread_spin_lock");
    real_spin_trylock = next("pthread_spin_trylock");
    __atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
    guard_leave_lookup();
}

/* Resolves on first use (a call before the constructor ran) and tells
 * whether the call must only be forwarded. */
static inline int pass_through(void)
{
    if (unlikely(!__atomic_load_n(&resolved, __ATOMIC_ACQUIRE)))
        wait_hooks_init();
    return unlikely(!__atomic_load_n(&contention_on, __ATOMIC_RELAXED) ||
                    guard_active());
}

/* The missing function's honest answer: what the C library gives for an
 * operation it does not support. */
#define FORWARD(fn, ...) ((fn) ? (fn)(__VA_ARGS__) : ENOSYS)

/* ---- timing --------------------------------------------------------------- */

struct wait {
    int64_t t0;
    void *handle; /* the sampled lock waiter, or NULL */
    const void *lock;
    uint32_t ender; /* for a trace: the thread whose end ends it, or 0 */
};

/* Starts timing a wait; lock (a mutex or rwlock) registers the waiter for
 * the holder's charge, NULL for a wait on something else. */
static void wait_begin(struct wait *w, const void *lock)
{
    int saved = errno;
    w->t0 = contention_clock();
    w->lock = lock;
    w->ender = 0;
    w->handle = lock ? contention_arrive(lock, w->t0) : NULL;
    errno = saved;
}

/* Ends the wait whose real call returned r (0 when the lock was taken).
 * A lock that was not taken (timed out) is not a lock wait in the block
 * profile, as lock_hooks.c decides; the other waits are recorded either
 * way. Returns r. */
static int wait_end(struct wait *w, int r, int record_failed)
{
    int saved = errno;
    int64_t t1 = contention_clock();
    if (w->handle)
        contention_leave(w->handle, t1);
    else if (w->lock && r == 0 && contention_may_charge(w->lock))
        contention_handover(w->lock);
    if (r == 0 || record_failed)
        contention_block_event(t1 - w->t0);
    if (unlikely(trace_on))
        trace_interval(TRACE_SYNC, (uint64_t)w->lock, w->t0, w->ender);
    errno = saved;
    return r;
}

/* The value of `call`, timed as one wait on lock (NULL: not a lock);
 * record_failed as wait_end's. A statement expression, so that the call is
 * made between the two clock reads. */
#define TIMED_WAIT(lock, record_failed, call)                                  \
    ({                                                                         \
        struct wait w_;                                                        \
        wait_begin(&w_, (lock));                                               \
        wait_end(&w_, (call), (record_failed));                                \
    })

/* The value of a join's `call`, timed as one wait ended by thread t's end
 * (named in a trace). */
#define JOIN_WAIT(t, record_failed, call)                                      \
    ({                                                                         \
        struct wait w_;                                                        \
        wait_begin(&w_, NULL);                                                 \
        if (unlikely(trace_on))                                                \
            w_.ender = trace_thread_tid(t);                                    \
        wait_end(&w_, (call), (record_failed));                                \
    })

/* A lock that tries first: what the try-lock answered, unless the lock was
 * busy; then the blocking call, timed as a wait on lock (NULL: its holder
 * is not followed). */
#define TRY_THEN_WAIT(lock, try_call, wait_call)                               \
    ({                                                                         \
        int r_ = (try_call);                                                   \
        likely(r_ != EBUSY) ? r_ : TIMED_WAIT((lock), 0, (wait_call));         \
    })

/* ---- locks with a clock ----------------------------------------------------- */

EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock,
                                   const struct timespec *abstime)
{
    if (pass_through() || !real_mutex_trylock)
        return FORWARD(real_mutex_clocklock, m, clock, abstime);
    return TRY_THEN_WAIT(m, real_mutex_trylock(m),
                         FORWARD(real_mutex_clocklock, m, clock, abstime));
}

static int rw_clocklock(pthread_rwlock_t *l, clockid_t clock,
                        const struct timespec *abstime, int kind)
{
    if (unlikely(!resolved))
        wait_hooks_init();
    rwlock_fn trylock = rw[kind].real_trylock;
    rwlock_clock_fn lock = rw[kind].real_clocklock;
    if (pass_through() || !trylock)
        return FORWARD(lock, l, clock, abstime);
    return TRY_THEN_WAIT(l, trylock(l), FORWARD(lock, l, clock, abstime));
}

EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *l, clockid_t clock,
                                      const struct timespec *abstime)
{
    return rw_clocklock(l, clock, abstime, RW_READ);
}

EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *l, clockid_t clock,
                                      const struct timespec *abstime)
{
    return rw_clocklock(l, clock, abstime, RW_WRITE);
}

/* ---- condition variable and semaphore with a clock -------------------------- */

static inline __attribute__((always_inline)) int pthread_cond_clockwait_body(pthread_cond_t *c, pthread_mutex_t *m,
                                  clockid_t clock,
                                  const struct timespec *abstime)
{
    arm_poke(ARM_WAIT, 0);
    if (pass_through())
        return FORWARD(real_cond_clockwait, c, m, clock, abstime);
    if (contention_may_charge(m)) {
        /* The real wait unlocks m where no hook sees it: charge m's
         * waiters' delay to this caller now, as lock_hooks.c does for
         * pthread_cond_wait. */
        int saved = errno;
        int64_t delay, count;
        if (contention_charge(m, contention_stamp(), &delay, &count))
            contention_mutex_event(delay, count);
        errno = saved;
    }
    return TIMED_WAIT(NULL, 1,
                      FORWARD(real_cond_clockwait, c, m, clock, abstime));
}

/* Noted while it waits (agent/threads/blocked.h). */
EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  clockid_t clock,
                                  const struct timespec *abstime)
{
    int n_ = BLOCKED_ENTER(SYS_futex, real_cond_clockwait);
    int r_ = pthread_cond_clockwait_body(c, m, clock, abstime);
    BLOCKED_LEAVE(n_);
    return r_;
}

static inline __attribute__((always_inline)) int sem_clockwait_body(sem_t *s, clockid_t clock,
                         const struct timespec *abstime)
{
    arm_poke(ARM_WAIT, 0);
    if (pass_through() || !real_sem_clockwait || !real_sem_trywait)
        return FORWARD(real_sem_clockwait, s, clock, abstime);
    int saved = errno;
    if (real_sem_trywait(s) == 0)
        return 0;
    if (errno != EAGAIN)
        return real_sem_clockwait(s, clock, abstime);
    errno = saved;
    return TIMED_WAIT(NULL, 1, real_sem_clockwait(s, clock, abstime));
}

/* Noted while it waits (agent/threads/blocked.h). */
EXPORT int sem_clockwait(sem_t *s, clockid_t clock,
                         const struct timespec *abstime)
{
    int n_ = BLOCKED_ENTER(SYS_futex, real_sem_clockwait);
    int r_ = sem_clockwait_body(s, clock, abstime);
    BLOCKED_LEAVE(n_);
    return r_;
}

/* ---- waits that are not locks ------------------------------------------------ */

EXPORT int pthread_barrier_wait(pthread_barrier_t *b)
{
    arm_poke(ARM_WAIT, 0);
    if (pass_through())
        return FORWARD(real_barrier_wait, b);
    /* PTHREAD_BARRIER_SERIAL_THREAD is a success too. */
    return TIMED_WAIT(NULL, 1, FORWARD(real_barrier_wait, b));
}

EXPORT int pthread_join(pthread_t t, void **ret)
{
    arm_poke(ARM_WAIT, 0);
    if (pass_through())
        return FORWARD(real_join, t, ret);
    return JOIN_WAIT(t, 0, FORWARD(real_join, t, ret));
}

EXPORT int pthread_timedjoin_np(pthread_t t, void **ret,
                                const struct timespec *abstime)
{
    arm_poke(ARM_WAIT, 0);
    if (pass_through())
        return FORWARD(real_timedjoin, t, ret, abstime);
    return JOIN_WAIT(t, 1, FORWARD(real_timedjoin, t, ret, abstime));
}

EXPORT int pthread_clockjoin_np(pthread_t t, void **ret, clockid_t clock,
                                const struct timespec *abstime)
{
    arm_poke(ARM_WAIT, 0);
    if (pass_through())
        return FORWARD(real_clockjoin, t, ret, clock, abstime);
    return JOIN_WAIT(t, 1, FORWARD(real_clockjoin, t, ret, clock, abstime));
}

/* A spin lock waits on the CPU (the CPU profile shows it too); its holder
 * is not charged: the unlock is a plain store that is not worth a hook. */
EXPORT int pthread_spin_lock(pthread_spinlock_t *l)
{
    if (pass_through() || !real_spin_trylock)
        return FORWARD(real_spin_lock, l);
    return TRY_THEN_WAIT(NULL, real_spin_trylock(l),
                         FORWARD(real_spin_lock, l));
}
