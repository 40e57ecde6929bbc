/*
 * Who may be sent the agent's signals. A thread that blocks a signal reads
 * it, if at all, synchronously (signalfd, sigwait, sigtimedwait): the
 * agent's profiling signal or its thread-dump signal pending there would
 * reach the host as a signal it never expected. So the agent sends neither
 * to a thread that blocks it: a CPU profile arms no timer on such a thread
 * (cpu_timer.c), a threads dump does not ask it (threads.c).
 *
 * Masks change all the time, so the check and the sending must not race
 * with a thread's own change. The senders (the agent's workers) and the
 * changers (the mask interposers, sigmask_hooks.c, on host threads) agree
 * through sigmask_lock:
 *  - while nothing of the agent's is being sent (no profile, no dump), a
 *    change counts itself in sigmask_changing and checks sigmask_watched,
 *    both sequentially consistent: either it sees the watch and takes the
 *    lock, or the watcher sees it in flight and waits for it to finish;
 *  - while watched, a change happens under the lock, and a sender looks at
 *    a thread's mask (/proc SigBlk) and sends (arms a timer, queues a
 *    signal) under the same lock: a thread's mask cannot change between
 *    the look and the sending.
 * A thread that blocks a signal of ours has its timer disarmed before the
 * real call (a signal already generated is delivered on the way back from
 * that system call, while still unblocked), and anything of ours still
 * pending on it afterwards is dequeued (sigmask_hooks.c).
 *
 * Contexts: the watch and the /proc look on the agent's workers; the lock
 * also on host threads inside the mask interposers, with the guard
 * entered (a host handler that changes its mask inside that section goes
 * straight to the C library). Never in the agent's own signal handlers.
 */
#include "agent/compiler.h"
#include "agent/core/next_symbol.h"
#include "agent/host/proc.h"
#include "agent/host/sigmask.h"
#include "agent/fork_step.h"
#include "agent/spinlock.h"
#include "agent/core/real.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int sigmask_changing;
int sigmask_watched;
spinlock_t sigmask_lock;

static int (*next_pthread_sigmask)(int, const sigset_t *, sigset_t *);

/* Resolved before main (constructor 101); a call before that resolves it
 * itself. */
__attribute__((constructor(101))) static void sigmask_resolve(void)
{
    if (!next_pthread_sigmask)
        next_pthread_sigmask = (int (*)(int, const sigset_t *, sigset_t *))
            next_symbol("pthread_sigmask");
}

int sigmask_real(int how, const sigset_t *set, sigset_t *old)
{
    if (unlikely(!next_pthread_sigmask)) {
        sigmask_resolve();
        if (!next_pthread_sigmask)
            return ENOSYS;
    }
    return next_pthread_sigmask(how, set, old);
}

void sigmask_watch_begin(void)
{
    spin_lock(&sigmask_lock);
    __atomic_fetch_add(&sigmask_watched, 1, __ATOMIC_SEQ_CST);
    spin_unlock(&sigmask_lock);
    /* Changes that began before the watch finish unwatched: wait for them
     * (each is one system call). Not for ever: a host handler that
     * longjmp'ed out of one leaves the count raised for good. */
    for (int i = 0; i < 2000 &&
                    __atomic_load_n(&sigmask_changing, __ATOMIC_SEQ_CST) != 0;
         i++) {
        struct timespec nap = {0, 10000};
        real_nanosleep(&nap, NULL);
    }
}

void sigmask_watch_end(void)
{
    __atomic_fetch_sub(&sigmask_watched, 1, __ATOMIC_SEQ_CST);
}

/* Without /proc (chrooted): the mask from the threads book (proc_book.c);
 * the pending signals of the calling thread only, from sigpending, which
 * adds the process-wide ones (a host's signal dequeued on the way is
 * queued back to this thread: sigmask_hooks.c). */
static int book_mask(int tid, const char *name, unsigned long long *mask)
{
    if (!__atomic_load_n(&proc_book_on, __ATOMIC_ACQUIRE))
        return -1;
    if (strcmp(name, "\nSigBlk:") == 0) {
        uint64_t blocked;
        if (proc_book_blocked(tid, &blocked) != 0)
            return -1;
        *mask = blocked;
        return 0;
    }
    sigset_t pending;
    if (tid != (int)real_syscall(SYS_gettid) || sigpending(&pending) != 0)
        return -1;
    *mask = 0;
    for (int sig = 1; sig <= 64 && sig < NSIG; sig++)
        if (sigismember(&pending, sig) == 1)
            *mask |= 1ULL << (sig - 1);
    return 0;
}

/* Field `name` ("SigBlk:", "SigPnd:") of /proc/self/task/TID/status, a
 * mask of signals 1..64 (bit sig - 1), into *mask. Returns 0 or -1 when
 * unreadable. */
static int status_mask(int tid, const char *name, unsigned long long *mask)
{
    char buf[2048];
    if (proc_task_read(NULL, tid, "status", buf, sizeof buf) <= 0)
        return book_mask(tid, name, mask);
    char *p = strstr(buf, name);
    if (!p)
        return -1;
    *mask = strtoull(p + strlen(name), NULL, 16);
    return 0;
}

int sigmask_thread_blocks(int tid, int sig)
{
    unsigned long long m;
    if (status_mask(tid, "\nSigBlk:", &m) != 0)
        return -1;
    return (m >> (sig - 1)) & 1;
}

int sigmask_thread_pending(int tid, int sig)
{
    unsigned long long m;
    return status_mask(tid, "\nSigPnd:", &m) == 0 && ((m >> (sig - 1)) & 1);
}

int sigmask_self_blocks(int sig)
{
    sigset_t cur;
    if (sigmask_real(SIG_BLOCK, NULL, &cur) != 0)
        return 1;
    return sigismember(&cur, sig) == 1;
}

FORK_PATH void sigmask_fork_child(void)
{
    /* The parent's workers and changers did not come along. */
    FORK_SET_ATOMIC(sigmask_changing, 0);
    FORK_SET_ATOMIC(sigmask_watched, 0);
    FORK_SET(sigmask_lock.locked, 0);
}
