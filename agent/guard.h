/* The reentrancy guard (core/guard.c). */

#ifndef PPROF_AGENT_GUARD_H
#define PPROF_AGENT_GUARD_H

#include <pthread.h>

/*
 * Per-thread state in initial-exec TLS (never allocates). in_agent > 0 means
 * "this thread is inside the agent": every interposer then forwards straight
 * to the real function, and signal handlers drop their sample. The agent's
 * own threads keep agent_thread set for their whole life.
 */
struct agent_tls {
    int in_agent;
    int agent_thread;
    int cancel_state; /* the host's cancel state while in_agent > 0 */
    int tid; /* this thread's id, 0 until spin_lock first needs it */
    int in_loader; /* > 0 inside the real dl_iterate_phdr (loader lock) */
    int phdr_busy; /* this thread's share of cpu_phdr_busy (phdr_cache.c) */
    int gate_depth; /* this thread's nesting in the fork gate (loader.c) */
};
extern __thread struct agent_tls agent_tls
    __attribute__((tls_model("initial-exec")));

static inline int guard_active(void)
{
    return agent_tls.in_agent | agent_tls.agent_thread;
}

/*
 * The guard also keeps the agent's work out of the host's thread
 * cancellation. An interposed call is a cancellation point exactly when the
 * C library's function is one; but the work the agent does inside it (a
 * stack capture, whose unwinder may read() a pipe; a log line, which
 * write()s; opening a file) reaches real cancellation points, where a
 * pending deferred pthread_cancel would act: inside pthread_mutex_lock
 * after the mutex was taken and before the host's cleanup handler exists,
 * leaving the mutex held for ever. So the outermost guard_enter() disables
 * cancellation and the matching guard_leave() puts the host's state back.
 * Re-enabling never acts on a cancel that arrived meanwhile under deferred
 * cancellation (the host's next cancellation point does); in asynchronous
 * mode it acts at once, as the cancel signal would have, so a guard region
 * ends where the agent's state is settled (the signal handlers leave it
 * last). Every agent path that may reach a cancellation point runs inside
 * the guard; the fast paths of the interposers never enter it and pay
 * nothing.
 *
 * Async-signal-safe in practice: glibc's pthread_setcancelstate is a
 * compare-and-swap loop on the calling thread's own descriptor (not on
 * POSIX's list). A handler entering while the interrupted code is between
 * the decrement and the restore of guard_leave() saves and restores the
 * disabled state itself; the interrupted code restores from the copy it
 * read before the decrement.
 */
static inline void guard_enter(void)
{
    if (agent_tls.in_agent++ == 0) {
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        int old = PTHREAD_CANCEL_ENABLE;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
        agent_tls.cancel_state = old;
    }
}
static inline void guard_leave(void)
{
    int old = agent_tls.cancel_state;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (--agent_tls.in_agent == 0 && old != PTHREAD_CANCEL_DISABLE)
        pthread_setcancelstate(old, NULL);
}

/*
 * The guard of an interposer's first call, around its look-ups of the C
 * library's functions (next_symbol, dlvsym): the count alone, so that an
 * allocation made by a look-up is not sampled, without the cancel state.
 * A first call can come before the agent's constructor, inside another
 * library's start-up, where pthread_setcancelstate is a sanitizer's
 * interceptor that cannot forward yet; no look-up reaches a cancellation
 * point. Async-signal-safe.
 */
static inline void guard_enter_lookup(void)
{
    agent_tls.in_agent++;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static inline void guard_leave_lookup(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    agent_tls.in_agent--;
}

/* 1 once the constructor has finished and the agent is enabled. */
extern volatile int agent_ready;
/* Non-zero once the host installed a system-call filter (seccomp, through
 * prctl or syscall()), and while a call that may install one runs: from
 * then on the agent makes no system call it can do without (a sandbox
 * kills the caller of one it does not allow). Bit 0: a filter went in;
 * each call in flight adds 2 (sandbox_attempt_*). Read it as a boolean. */
extern volatile int agent_sandboxed;

/* Around the host's real call that may install a filter: begin before it
 * (agent_sandboxed reads non-zero from then on), end after it with
 * installed = whether the real call succeeded. A call that failed (a
 * probe with no filter: EFAULT, EINVAL, EACCES) leaves agent_sandboxed as
 * it was. Async-signal-safe. */
void sandbox_attempt_begin(void);
void sandbox_attempt_end(int installed);

/* 1 once a filter went in (not while a call that may install one runs).
 * Async-signal-safe. */
static inline int sandbox_installed(void)
{
    return __atomic_load_n(&agent_sandboxed, __ATOMIC_RELAXED) & 1;
}

/* In a fork child: forgets the forking thread's cached thread id (guard.c).
 * Async-signal-safe. */
void guard_fork_child(void);

/* Starts fn(arg) on a new thread of the agent's own: created with the
 * guard entered (thread_hooks.c marks it the agent's, never sampled) and
 * every signal blocked (it inherits that mask), as civetweb's threads.
 * Detached, or joinable with its id in *joinable when that is not NULL.
 * Returns 0 or -errno. Not async-signal-safe. */
int agent_thread_spawn(void *(*fn)(void *), void *arg, pthread_t *joinable);

/* A thread an attached agent ends at its detach (the watch, the dumps,
 * the rescanner): started joinable when the agent was attached, told to
 * stop through a flag it reads at each wake, then joined. */
struct agent_stoppable {
    pthread_t tid;
    int joinable; /* started joinable, not joined yet */
    int told;     /* told to stop */
};

/* agent_thread_spawn(fn, NULL) for t, joinable when joinable is set, not
 * told to stop. Returns 0 or -errno. Not async-signal-safe. */
int stoppable_spawn(struct agent_stoppable *t, void *(*fn)(void *),
                    int joinable);
/* Tells t to stop; 1 once it was told (the thread's look at each wake).
 * Async-signal-safe. */
void stoppable_tell(struct agent_stoppable *t);
int stoppable_told(struct agent_stoppable *t);
/* Waits for t's end when it is joinable, which it is not after. Not
 * async-signal-safe. */
void stoppable_join(struct agent_stoppable *t);

/* First thing on each of the agent's own threads (their functions, and
 * civetweb's init_thread): under ThreadSanitizer the thread's memory
 * accesses are ignored. What TSan sees of them comes from its interceptors
 * only (the agent is not instrumented), ordered by the agent's own atomics
 * and spinlocks, which TSan cannot see: a descriptor number one agent
 * thread closed and another reused was reported as a data race, and the
 * host's run ended with TSan's status 66. agent_thread_end before the
 * thread ends (TSan insists). Neither takes a lock or calls the loader:
 * agent_thread_prepare, on the creating thread before each creation
 * (agent_thread_spawn does it), looks up what they call. Not
 * async-signal-safe. */
void agent_thread_prepare(void);
void agent_thread_begin(void);
void agent_thread_end(void);

/* Defines the agent's thread function name(arg), which runs name_run(arg)
 * between agent_thread_begin and agent_thread_end. */
#define AGENT_THREAD_MAIN(name)                                            \
    static void *name##_run(void *);                                       \
    static void *name(void *arg)                                           \
    {                                                                      \
        agent_thread_begin();                                              \
        void *ret_ = name##_run(arg);                                      \
        agent_thread_end();                                                \
        return ret_;                                                       \
    }

#endif
