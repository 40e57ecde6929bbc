/*
 * Interposers of the pthread lock, condition variable and semaphore waits
 * that feed the block and mutex profiles (agent/locks/contention.c records).
 *
 * Entered on every host thread, for every lock operation: the fast path
 * must stay a try-lock. A lock first tries the real try-lock; only when that
 * reports the lock busy does the slow path take timestamps, register the
 * waiter and call the real blocking lock. An unlock reads one global (are
 * there followed waiters anywhere?) and, only when there are, the hint slot
 * of its own address (contention_followed()); then it forwards. The agent's
 * own threads and calls made while the guard is entered go straight to the
 * real functions.
 *
 * In a process that is not dumpable, a wait that blocks (a contended lock,
 * a condition or semaphore wait) notes where it was entered while it waits
 * (agent/threads/blocked.h); otherwise that costs one load of a flag.
 *
 * Never changes what the host sees: the same return values and errno, the
 * same blocking behaviour; a failure to record is counted, never reported
 * to the caller. The holder's charge is taken after the real unlock, never
 * inside the host's critical section.
 *
 * Versioned symbols. glibc has two pthread_cond_wait and
 * pthread_cond_timedwait: @GLIBC_2.2.5 (compatibility, for binaries built
 * before 2003, which treats the condition as a pointer to a lazily
 * allocated one) and @@GLIBC_2.3.2 (current). The agent's version script is
 * anonymous, so its one unversioned definition binds callers of both
 * versions. Forwarding an old caller to the new code would mix the two
 * layouts on one object (its signal/broadcast still go to the old code):
 * a lost wake-up or a crash. So the hook finds which version the calling
 * object asked for, from that object's own relocations and version needs
 * (cached per object), and forwards to that version with dlvsym.
 */
#include "agent/threads/blocked.h"
#include "agent/compiler.h"
#include "agent/locks/contention.h"
#include "agent/locks/deadlock.h"
#include "agent/guard.h"
#include "agent/core/next_symbol.h"
#include "agent/trace/trace.h"
#include "agent/core/arm.h"

#include <dlfcn.h>
#include <errno.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <time.h>

/* glibc's names, weak references: musl's loader, which has neither,
 * would refuse the agent for a name it cannot resolve. Neither is used
 * there: the agent stands aside (process/init.c), the flag below is read
 * only while the contention profile is on, and dlvsym is asked only
 * when it is there (lock_hooks_init). */
#pragma weak dlvsym
#pragma weak __libc_single_threaded

#define EXPORT __attribute__((visibility("default")))
/* The uncontended lock pair's hooks keep no frame record of their own (the
 * caller's frame pointer stays in its register; the unwind tables describe
 * the frame): three instructions of the pair (docs/contention.md). */
#define LOCK_FAST_PATH __attribute__((optimize("omit-frame-pointer")))

typedef int (*mutex_fn)(pthread_mutex_t *);
typedef int (*mutex_timed_fn)(pthread_mutex_t *, const struct timespec *);
typedef int (*rwlock_fn)(pthread_rwlock_t *);
typedef int (*rwlock_timed_fn)(pthread_rwlock_t *, const struct timespec *);
typedef int (*cond_wait_fn)(pthread_cond_t *, pthread_mutex_t *);
typedef int (*cond_timed_fn)(pthread_cond_t *, pthread_mutex_t *,
                             const struct timespec *);
typedef int (*sem_fn)(sem_t *);
typedef int (*sem_timed_fn)(sem_t *, const struct timespec *);

/* Every real_* pointer starts at a stub that resolves them all and calls
 * through, so the fast paths never test for NULL. */
static int stub_mutex_lock(pthread_mutex_t *m);
static int stub_mutex_trylock(pthread_mutex_t *m);
static int stub_mutex_unlock(pthread_mutex_t *m);

static mutex_fn real_pthread_mutex_lock = stub_mutex_lock;
static mutex_fn real_pthread_mutex_trylock = stub_mutex_trylock;
static mutex_fn real_pthread_mutex_unlock = stub_mutex_unlock;
static mutex_timed_fn real_pthread_mutex_timedlock;
static rwlock_fn real_pthread_rwlock_unlock;
/* A read-write lock's waits come in a read and a write kind, alike but for
 * the real functions they forward to. */
enum { RW_READ, RW_WRITE };
static struct {
    const char *lock, *trylock, *timedlock; /* their names */
    rwlock_fn real_lock, real_trylock;
    rwlock_timed_fn real_timedlock;
} rw[2] = {
    [RW_READ] = {"pthread_rwlock_rdlock", "pthread_rwlock_tryrdlock",
                 "pthread_rwlock_timedrdlock"},
    [RW_WRITE] = {"pthread_rwlock_wrlock", "pthread_rwlock_trywrlock",
                  "pthread_rwlock_timedwrlock"},
};
static cond_wait_fn real_cond_wait_new, real_cond_wait_old;
static cond_timed_fn real_cond_timedwait_new, real_cond_timedwait_old;
static sem_fn real_sem_wait, real_sem_trywait;
static sem_timed_fn real_sem_timedwait;

static void *next(const char *name)
{
    return next_symbol(name);
}

/* The next definition of name at glibc's version, or NULL (another C
 * library has no versions, nor dlvsym). */
static void *next_version(const char *name, const char *version)
{
    return dlvsym ? dlvsym(RTLD_NEXT, name, version) : NULL;
}

/* The current condition variable's function: the next definition of the
 * name, as for every other name. That is the C library's default version
 * (GLIBC_2.3.2) unless something between the agent and the C library
 * defines the name without a version: ThreadSanitizer's runtime, which a
 * lookup of GLIBC_2.3.2 went past; the agent's waits then reached the C
 * library unseen, TSan never saw the mutex released, and reported its
 * next lock as a "double lock" (exit 66). */
static void *next_current(const char *name)
{
    void *p = next(name);
    return p ? p : next_version(name, "GLIBC_2.3.2");
}

void lock_hooks_init(void)
{
    if (real_pthread_rwlock_unlock)
        return;
    guard_enter_lookup();
    /* Written before the stubs are replaced: a racing first call either
     * sees a stub (which comes here again) or a resolved pointer. */
    real_pthread_mutex_timedlock = next("pthread_mutex_timedlock");
    for (int k = RW_READ; k <= RW_WRITE; k++) {
        rw[k].real_lock = next(rw[k].lock);
        rw[k].real_trylock = next(rw[k].trylock);
        rw[k].real_timedlock = next(rw[k].timedlock);
    }
    real_cond_wait_new = next_current("pthread_cond_wait");
    real_cond_wait_old = next_version("pthread_cond_wait", "GLIBC_2.2.5");
    real_cond_timedwait_new = next_current("pthread_cond_timedwait");
    real_cond_timedwait_old =
        next_version("pthread_cond_timedwait", "GLIBC_2.2.5");
    real_sem_wait = next("sem_wait");
    real_sem_trywait = next("sem_trywait");
    real_sem_timedwait = next("sem_timedwait");
    mutex_fn lock = next("pthread_mutex_lock");
    mutex_fn trylock = next("pthread_mutex_trylock");
    mutex_fn unlock = next("pthread_mutex_unlock");
    if (lock)
        __atomic_store_n(&real_pthread_mutex_lock, lock, __ATOMIC_RELEASE);
    if (trylock)
        __atomic_store_n(&real_pthread_mutex_trylock, trylock,
                         __ATOMIC_RELEASE);
    if (unlock)
        __atomic_store_n(&real_pthread_mutex_unlock, unlock,
                         __ATOMIC_RELEASE);
    rwlock_fn rwunlock = next("pthread_rwlock_unlock");
    __atomic_store_n(&real_pthread_rwlock_unlock, rwunlock, __ATOMIC_RELEASE);
    guard_leave_lookup();
}

/* The stubs only run before lock_hooks_init() finished; if resolution
 * failed there is no real function to call, and the only honest answer is
 * the error a lock can give. */
static int stub_mutex_lock(pthread_mutex_t *m)
{
    lock_hooks_init();
    return real_pthread_mutex_lock != stub_mutex_lock
               ? real_pthread_mutex_lock(m)
               : EINVAL;
}

static int stub_mutex_trylock(pthread_mutex_t *m)
{
    lock_hooks_init();
    return real_pthread_mutex_trylock != stub_mutex_trylock
               ? real_pthread_mutex_trylock(m)
               : EINVAL;
}

static int stub_mutex_unlock(pthread_mutex_t *m)
{
    lock_hooks_init();
    return real_pthread_mutex_unlock != stub_mutex_unlock
               ? real_pthread_mutex_unlock(m)
               : EINVAL;
}

/* 1 when this call must only be forwarded. */
static inline int pass_through(void)
{
    return unlikely(!__atomic_load_n(&contention_on, __ATOMIC_RELAXED) ||
                    guard_active());
}

/*
 * glibc's own flag (2.32 and later): true while the process has never had
 * a second thread. glibc then takes a process-private mutex with a plain
 * store instead of a locked compare-exchange, and nothing can contend for
 * it: the lock hook forwards at once rather than paying the try-lock's
 * locked instruction (a process-shared mutex can be contended by another
 * process and is measured). It turns false, for good, when the first
 * thread is created: the host's, or the agent's own (the deferred start's
 * thread, unless PPROF_ADDR=off). The agent needs glibc 2.34 anyway.
 *
 * Read only while contention_on is CONTENTION_ON_SINGLE, so that a
 * multi-threaded process pays nothing for it: the first lock that finds
 * glibc's flag false sets CONTENTION_ON. Returns 1 when the lock must be
 * measured, 0 when it must only be forwarded (on is 0: profiles off).
 */
static inline int measure_when(int on, const pthread_mutex_t *m)
{
    if (on != CONTENTION_ON_SINGLE)
        return on != 0;
    if (__libc_single_threaded)
        return (m->__data.__kind & 128 /* PTHREAD_MUTEX_PSHARED_BIT */) != 0;
    int expected = CONTENTION_ON_SINGLE;
    __atomic_compare_exchange_n(&contention_on, &expected, CONTENTION_ON, 0,
                                __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return 1;
}

/* ---- waits ---------------------------------------------------------------- */

/* The contended path of a lock: lock is the mutex or rwlock address (for
 * the holder's charge), call performs the real blocking operation. */
struct wait_op {
    const void *lock;
    int rwlock; /* lock is a rwlock (for its holder's id in the trace) */
    int (*call)(const struct wait_op *);
    void *obj;
    const struct timespec *abstime;
    mutex_timed_fn mutex_timed;
    mutex_fn mutex;
    rwlock_fn rw;
    rwlock_timed_fn rw_timed;
};

/* The real function op calls (a noted wait's leaf). */
static void *op_function(const struct wait_op *op)
{
    return op->mutex         ? (void *)op->mutex
           : op->mutex_timed ? (void *)op->mutex_timed
           : op->rw          ? (void *)op->rw
                             : (void *)op->rw_timed;
}

static __attribute__((noinline)) int wait_slow(const struct wait_op *op)
{
    int saved = errno;
    int64_t t0 = contention_clock();
    void *h = contention_arrive(op->lock, t0);
    /* Noted for the deadlock look: who waits for what, since when. */
    struct deadlock_slot *dl = deadlock_wait_begin(
        op->lock, op->rw || op->rw_timed ? DEADLOCK_RWLOCK : DEADLOCK_MUTEX,
        t0);
    uint32_t holder = trace_on ? trace_lock_owner(op->lock, op->rwlock) : 0;
    errno = saved;
    int n = BLOCKED_ENTER(SYS_futex, op_function(op));
    int r = op->call(op);
    BLOCKED_LEAVE(n);
    deadlock_wait_end(dl);
    saved = errno;
    int64_t t1 = contention_clock();
    if (h)
        contention_leave(h, t1);
    else if (r == 0 && contention_may_charge(op->lock))
        contention_handover(op->lock);
    if (r == 0)
        contention_block_event(t1 - t0);
    if (unlikely(trace_on))
        trace_interval(TRACE_SYNC, (uint64_t)op->lock, t0, holder);
    errno = saved;
    return r;
}

static int call_mutex(const struct wait_op *op)
{
    return op->mutex(op->obj);
}
static int call_mutex_timed(const struct wait_op *op)
{
    return op->mutex_timed(op->obj, op->abstime);
}
static int call_rw(const struct wait_op *op)
{
    return op->rw(op->obj);
}
static int call_rw_timed(const struct wait_op *op)
{
    return op->rw_timed(op->obj, op->abstime);
}

/* Unmeasured, in a process that is not dumpable: a lock that must wait
 * is noted while it waits (agent/threads/blocked.h). */
static __attribute__((noinline)) int mutex_lock_noted(pthread_mutex_t *m)
{
    int r = real_pthread_mutex_trylock(m);
    if (r != EBUSY)
        return r;
    int n = BLOCKED_ENTER(SYS_futex, real_pthread_mutex_lock);
    r = real_pthread_mutex_lock(m);
    BLOCKED_LEAVE(n);
    return r;
}

/* Out of line, so that the fast path below needs no stack frame for op. */
static __attribute__((noinline)) int mutex_lock_slow(pthread_mutex_t *m)
{
    /* The agent's own threads and the guarded agent code wait unmeasured
     * (asked only here: the try-lock does the same for everyone). */
    if (guard_active())
        return real_pthread_mutex_lock(m);
    struct wait_op op = {.lock = m, .call = call_mutex, .obj = m,
                         .mutex = real_pthread_mutex_lock};
    return wait_slow(&op);
}

EXPORT LOCK_FAST_PATH int pthread_mutex_lock(pthread_mutex_t *m)
{
    int on = __atomic_load_n(&contention_on, __ATOMIC_RELAXED);
    if (unlikely(on != CONTENTION_ON) && !measure_when(on, m))
        return unlikely(__atomic_load_n(&blocked_notes_on, __ATOMIC_RELAXED))
                   ? mutex_lock_noted(m)
                   : real_pthread_mutex_lock(m);
    int r = real_pthread_mutex_trylock(m);
    if (likely(r != EBUSY))
        return r;
    return mutex_lock_slow(m);
}

EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
    /* A try-lock never waits: nothing to record. */
    return real_pthread_mutex_trylock(m);
}

EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m,
                                   const struct timespec *abstime)
{
    if (!real_pthread_mutex_timedlock)
        lock_hooks_init();
    if (pass_through())
        return real_pthread_mutex_timedlock(m, abstime);
    int r = real_pthread_mutex_trylock(m);
    if (likely(r != EBUSY))
        return r;
    struct wait_op op = {.lock = m, .call = call_mutex_timed, .obj = m,
                         .abstime = abstime,
                         .mutex_timed = real_pthread_mutex_timedlock};
    return wait_slow(&op);
}

static int rw_lock(pthread_rwlock_t *l, int kind)
{
    if (!real_pthread_rwlock_unlock)
        lock_hooks_init();
    if (pass_through())
        return rw[kind].real_lock(l);
    int r = rw[kind].real_trylock(l);
    if (likely(r != EBUSY))
        return r;
    struct wait_op op = {.lock = l, .rwlock = 1, .call = call_rw, .obj = l,
                         .rw = rw[kind].real_lock};
    return wait_slow(&op);
}

static int rw_timedlock(pthread_rwlock_t *l, const struct timespec *abstime,
                        int kind)
{
    if (!real_pthread_rwlock_unlock)
        lock_hooks_init();
    if (pass_through())
        return rw[kind].real_timedlock(l, abstime);
    int r = rw[kind].real_trylock(l);
    if (likely(r != EBUSY))
        return r;
    struct wait_op op = {.lock = l, .rwlock = 1, .call = call_rw_timed,
                         .obj = l,
                         .abstime = abstime,
                         .rw_timed = rw[kind].real_timedlock};
    return wait_slow(&op);
}

EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
    return rw_lock(l, RW_READ);
}

EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
    return rw_lock(l, RW_WRITE);
}

EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *l,
                                      const struct timespec *abstime)
{
    return rw_timedlock(l, abstime, RW_READ);
}

EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *l,
                                      const struct timespec *abstime)
{
    return rw_timedlock(l, abstime, RW_WRITE);
}

/* ---- unlocks: the holder is charged its waiters' delay -------------------- */

/*
 * Charges the unlocking thread its waiters' delay, after the real unlock:
 * anything done before it would lengthen the critical section that the
 * waiters are queued on (measured: the bookkeeping alone cost 9% of the
 * contended benchmark when done before). A waiter woken by this unlock may
 * take the lock over, unlock and be charged before this runs: the record
 * keeps what accrued up to that hand-over for this charge (a stamp read
 * before the real unlock tells which is which; clock_gettime there cost
 * 6-10% of the contended benchmark, the TSC costs nothing measurable).
 * `lock` is only a key, never dereferenced: the host may free it as soon
 * as it is unlocked.
 */
static __attribute__((noinline)) void charge(const void *lock,
                                            uint64_t unlocked_at)
{
    if (guard_active() || !__atomic_load_n(&contention_on, __ATOMIC_RELAXED))
        return;
    int saved = errno;
    int64_t delay, count;
    if (contention_charge(lock, unlocked_at, &delay, &count))
        contention_mutex_event(delay, count);
    errno = saved;
}

/* The value of the real unlock `call` of lock, after which lock's waiters
 * are charged to this thread (stamped before the call). */
#define CHARGED_UNLOCK(lock, call)                                             \
    ({                                                                         \
        uint64_t t_ = contention_stamp();                                      \
        int r_ = (call);                                                       \
        charge((lock), t_);                                                    \
        r_;                                                                    \
    })

EXPORT LOCK_FAST_PATH int pthread_mutex_unlock(pthread_mutex_t *m)
{
    if (likely(!contention_may_charge(m)))
        return real_pthread_mutex_unlock(m);
    return CHARGED_UNLOCK(m, real_pthread_mutex_unlock(m));
}

EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *l)
{
    if (unlikely(!real_pthread_rwlock_unlock))
        lock_hooks_init();
    if (likely(!contention_may_charge(l)))
        return real_pthread_rwlock_unlock(l);
    return CHARGED_UNLOCK(l, real_pthread_rwlock_unlock(l));
}

/* ---- condition variables --------------------------------------------------- */

/* The version of a condition wait that the calling object asked for (the
 * comment at the top): old_fn when it was built against GLIBC_2.2.5. A
 * macro, so that the return address is the exported hook's caller. */
#define COND_VERSION(new_fn, old_fn)                                           \
    ((old_fn) && cond_version_old((uintptr_t)__builtin_return_address(0))      \
         ? (old_fn)                                                            \
         : (new_fn))

static __attribute__((noinline)) void cond_release(pthread_mutex_t *m)
{
    /* The real wait unlocks m inside the C library, where no hook sees it:
     * charge m's waiters' delay to this caller now. */
    charge(m, contention_stamp());
}

/* Before a real wait, which unlocks m where no hook sees it: m's waiters
 * are charged to this caller, then the wait's clock starts. */
static int64_t cond_block_begin(pthread_mutex_t *m)
{
    if (contention_may_charge(m))
        cond_release(m);
    return contention_clock();
}

static int cond_block_end(int r, int64_t t0, int kind)
{
    int saved = errno;
    contention_block_event(contention_clock() - t0);
    if (unlikely(trace_on))
        trace_interval(kind, 0, t0, 0);
    errno = saved;
    return r;
}

static inline __attribute__((always_inline)) int pthread_cond_wait_body(pthread_cond_t *c, pthread_mutex_t *m)
{
    arm_poke(ARM_WAIT, 0);
    if (unlikely(!real_cond_wait_new))
        lock_hooks_init();
    cond_wait_fn fn =
        COND_VERSION(real_cond_wait_new, real_cond_wait_old);
    if (pass_through())
        return fn(c, m);
    int64_t t0 = cond_block_begin(m);
    return cond_block_end(fn(c, m), t0, TRACE_COND);
}

/* Noted while it waits (agent/threads/blocked.h). */
EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    int n_ = BLOCKED_ENTER(SYS_futex, real_cond_wait_new);
    int r_ = pthread_cond_wait_body(c, m);
    BLOCKED_LEAVE(n_);
    return r_;
}

static inline __attribute__((always_inline)) int pthread_cond_timedwait_body(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abstime)
{
    arm_poke(ARM_WAIT, 0);
    if (unlikely(!real_cond_timedwait_new))
        lock_hooks_init();
    cond_timed_fn fn =
        COND_VERSION(real_cond_timedwait_new, real_cond_timedwait_old);
    if (pass_through())
        return fn(c, m, abstime);
    int64_t t0 = cond_block_begin(m);
    return cond_block_end(fn(c, m, abstime), t0, TRACE_COND);
}

/* Noted while it waits (agent/threads/blocked.h). */
EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abstime)
{
    int n_ = BLOCKED_ENTER(SYS_futex, real_cond_timedwait_new);
    int r_ = pthread_cond_timedwait_body(c, m, abstime);
    BLOCKED_LEAVE(n_);
    return r_;
}

/* ---- semaphores ------------------------------------------------------------- */

static inline __attribute__((always_inline)) int sem_wait_body(sem_t *s)
{
    arm_poke(ARM_WAIT, 0);
    if (unlikely(!real_sem_wait))
        lock_hooks_init();
    if (pass_through())
        return real_sem_wait(s);
    int saved = errno;
    if (real_sem_trywait(s) == 0)
        return 0;
    if (errno != EAGAIN)
        return real_sem_wait(s); /* let the real call report it */
    errno = saved;
    int64_t t0 = contention_clock();
    int r = real_sem_wait(s);
    return cond_block_end(r, t0, TRACE_SYNC);
}

/* Noted while it waits (agent/threads/blocked.h). */
EXPORT int sem_wait(sem_t *s)
{
    int n_ = BLOCKED_ENTER(SYS_futex, real_sem_wait);
    int r_ = sem_wait_body(s);
    BLOCKED_LEAVE(n_);
    return r_;
}

static inline __attribute__((always_inline)) int sem_timedwait_body(sem_t *s, const struct timespec *abstime)
{
    arm_poke(ARM_WAIT, 0);
    if (unlikely(!real_sem_timedwait))
        lock_hooks_init();
    if (pass_through())
        return real_sem_timedwait(s, abstime);
    int saved = errno;
    if (real_sem_trywait(s) == 0)
        return 0;
    if (errno != EAGAIN)
        return real_sem_timedwait(s, abstime);
    errno = saved;
    int64_t t0 = contention_clock();
    int r = real_sem_timedwait(s, abstime);
    return cond_block_end(r, t0, TRACE_SYNC);
}

/* Noted while it waits (agent/threads/blocked.h). */
EXPORT int sem_timedwait(sem_t *s, const struct timespec *abstime)
{
    int n_ = BLOCKED_ENTER(SYS_futex, real_sem_timedwait);
    int r_ = sem_timedwait_body(s, abstime);
    BLOCKED_LEAVE(n_);
    return r_;
}
