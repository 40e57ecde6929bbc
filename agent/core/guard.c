/*
 * The per-thread reentrancy state and the spinlock used by the agent's own
 * tables. Both are tiny and shared by every other file of the agent.
 *
 * The thread-local lives in initial-exec TLS so that touching it never calls
 * __tls_get_addr, which may allocate: interposed malloc and signal handlers
 * read it first thing.
 */
#include "agent/compiler.h"
#include "agent/fork_step.h"
#include "agent/guard.h"
#include "agent/spinlock.h"
#include "agent/core/real.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread struct agent_tls agent_tls __attribute__((tls_model("initial-exec")));

volatile int agent_ready;
volatile int agent_sandboxed;

/* The flag is up before the real call (the filter may be in force when it
 * returns, and another thread of the agent's may look meanwhile), and only
 * a call that installed a filter leaves it up: Firefox probes with a NULL
 * filter through prctl and syscall (EFAULT both), and a probe once stopped
 * the agent in every one of its processes. Async-signal-safe. */
void sandbox_attempt_begin(void)
{
    __atomic_add_fetch(&agent_sandboxed, 2, __ATOMIC_SEQ_CST);
}

void sandbox_attempt_end(int installed)
{
    if (installed)
        __atomic_or_fetch(&agent_sandboxed, 1, __ATOMIC_SEQ_CST);
    __atomic_sub_fetch(&agent_sandboxed, 2, __ATOMIC_SEQ_CST);
}

/* 1 when thread id tid is no longer a thread of this process: its holder
 * was a thread of the parent this process was forked from (or died). */
static int holder_gone(int tid)
{
    int saved = errno;
    int gone = real_syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH;
    errno = saved;
    return gone;
}

/*
 * The lock word holds its holder's thread id. A lock held by another
 * thread when the host forked stays "held" for ever in the child, where
 * that thread does not exist: after a while of spinning, a waiter checks
 * whether the holder still exists and takes the lock over if not. The
 * data the lock guards may then be half-updated; the child's profiles can
 * be off by the record in flight, which is better than a child that never
 * returns from malloc or pthread_mutex_unlock.
 */
/* The thread id is cached per thread: a system call on every lock doubled
 * the cost of recording contended mutex events. The child of a fork keeps
 * its parent thread's copy, so the first fork handler forgets it. */
static inline int my_tid(void)
{
    int tid = agent_tls.tid;
    if (unlikely(tid == 0)) {
        tid = (int)real_syscall(SYS_gettid);
        agent_tls.tid = tid;
    }
    return tid;
}

FORK_PATH void guard_fork_child(void)
{
    FORK_SET(agent_tls.tid, 0);
}

void spin_lock(spinlock_t *l)
{
    int me = my_tid();
    for (int spins = 0;; spins++) {
        int owner = 0;
        if (__atomic_compare_exchange_n(&l->locked, &owner, me, 0,
                                        __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        while ((owner = __atomic_load_n(&l->locked, __ATOMIC_RELAXED))) {
            if (++spins <= 100) {
                __builtin_ia32_pause();
                continue;
            }
            sched_yield();
            if ((spins & 255) == 0 && owner != me && holder_gone(owner) &&
                __atomic_compare_exchange_n(&l->locked, &owner, me, 0,
                                            __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                return;
        }
    }
}

/* ThreadSanitizer's annotations (a program TSan is linked into exports
 * them, not its __tsan_ignore_thread_* calls), NULL without TSan. Looked up
 * on the creating thread (agent_thread_prepare): the new thread must never
 * take the loader's lock. start_pause joins the waiting starter, and a
 * library's constructor calls it under that lock (Firefox's sandbox library
 * probes seccomp from its constructor, inside dlopen): a starter that
 * called dlsym on its way out waited for the lock its joiner held. */
static void (*tsan_ignore_begin)(const char *, int);
static void (*tsan_ignore_end)(const char *, int);
static int tsan_looked;

void agent_thread_prepare(void)
{
    if (__atomic_load_n(&tsan_looked, __ATOMIC_ACQUIRE))
        return;
    tsan_ignore_begin = (void (*)(const char *, int))dlsym(
        RTLD_DEFAULT, "AnnotateIgnoreReadsBegin");
    tsan_ignore_end = (void (*)(const char *, int))dlsym(
        RTLD_DEFAULT, "AnnotateIgnoreReadsEnd");
    __atomic_store_n(&tsan_looked, 1, __ATOMIC_RELEASE);
}

void agent_thread_begin(void)
{
    agent_tls.agent_thread = 1;
    if (tsan_ignore_begin && tsan_ignore_end)
        tsan_ignore_begin(__FILE__, __LINE__);
}

void agent_thread_end(void)
{
    if (tsan_ignore_begin && tsan_ignore_end)
        tsan_ignore_end(__FILE__, __LINE__);
}

int agent_thread_spawn(void *(*fn)(void *), void *arg, pthread_t *joinable)
{
    agent_thread_prepare();
    sigset_t all, old;
    sigfillset(&all);
    real_pthread_sigmask(SIG_SETMASK, &all, &old);
    guard_enter();
    pthread_t t;
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err == 0) {
        if (!joinable)
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        err = real_pthread_create(&t, &attr, fn, arg);
        pthread_attr_destroy(&attr);
        if (err == 0 && joinable)
            *joinable = t;
    }
    guard_leave();
    real_pthread_sigmask(SIG_SETMASK, &old, NULL);
    return -err;
}

int stoppable_spawn(struct agent_stoppable *t, void *(*fn)(void *),
                    int joinable)
{
    __atomic_store_n(&t->told, 0, __ATOMIC_RELEASE);
    int err = agent_thread_spawn(fn, NULL, joinable ? &t->tid : NULL);
    t->joinable = joinable && !err;
    return err;
}

void stoppable_tell(struct agent_stoppable *t)
{
    __atomic_store_n(&t->told, 1, __ATOMIC_RELEASE);
}

int stoppable_told(struct agent_stoppable *t)
{
    return __atomic_load_n(&t->told, __ATOMIC_ACQUIRE);
}

void stoppable_join(struct agent_stoppable *t)
{
    if (t->joinable)
        real_pthread_join(t->tid, NULL);
    t->joinable = 0;
}
