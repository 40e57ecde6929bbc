/*
 * The real-time signals the agent borrows from the host: the threads
 * dump's, the wall profile's (and the CPU profile's, when SIGPROF is the
 * host's). A signal is taken only while the host leaves it at its default
 * action, and given back the way it was found.
 *
 * Contexts: the agent's workers, when a profile or a dump starts and ends;
 * the forking thread, around fork (a timer signal must not interrupt
 * clone(): on kernels that signal from inside the call it restarts for
 * ever). Never in a signal handler.
 */
#include "agent/sigmask.h"
#include "agent/signals.h"
#include "agent/stack.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int signals_borrow(int first, int last, int skip,
                   void (*handler)(int, siginfo_t *, void *),
                   const sigset_t *mask, struct sigaction *saved)
{
    int step = first <= last ? 1 : -1;
    for (int sig = first; sig != last + step; sig += step) {
        if (sig == skip)
            continue;
        struct sigaction cur;
        if (sigaction(sig, NULL, &cur) != 0 || cur.sa_handler != SIG_DFL ||
            (cur.sa_flags & SA_SIGINFO))
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        if (mask)
            sa.sa_mask = *mask;
        else
            sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, saved) == 0) {
            stack_note_handler(sig);
            return sig;
        }
    }
    return -EAGAIN;
}

void signals_give_back(int sig, void (*handler)(int, siginfo_t *, void *),
                       const struct sigaction *saved)
{
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) ||
        cur.sa_sigaction != handler)
        return; /* the host replaced it meanwhile: leave the host's */
    /* SIG_IGN discards what is still pending (on a thread that blocked it,
     * or an expiry late), so the default action never sees our signal. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(sig, &ign, NULL);
    sigaction(sig, saved, NULL);
}

/* The mask the forking thread had before the first of the agent's
 * signals was blocked for the fork (the CPU and wall profiles' prepare
 * steps each add theirs; parent and child restore it once). */
static __thread sigset_t fork_saved __attribute__((tls_model("initial-exec")));
static __thread int fork_blocked __attribute__((tls_model("initial-exec")));

void signals_fork_block(int sig)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, sig);
    if (sigmask_real(SIG_BLOCK, &set, &old) == 0 && !fork_blocked) {
        fork_saved = old;
        fork_blocked = 1;
    }
}

void signals_fork_restore(void)
{
    if (fork_blocked)
        sigmask_real(SIG_SETMASK, &fork_saved, NULL);
    fork_blocked = 0;
}

int thread_timer_create(int tid, int sig, uint64_t value)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = sig;
    sev._sigev_un._tid = tid;
    sev.sigev_value.sival_ptr = (void *)(uintptr_t)value;
    int id;
    if (syscall(SYS_timer_create, thread_cpu_clock(tid), &sev, &id) != 0)
        return -errno;
    return id;
}

int thread_timer_set(int id, int64_t first, int64_t period)
{
    struct itimerspec its = {
        .it_interval = {period / 1000000000, period % 1000000000},
        .it_value = {first / 1000000000, first % 1000000000},
    };
    return syscall(SYS_timer_settime, id, 0, &its, NULL) == 0 ? 0 : -errno;
}

void signals_fork_child_reset(int sig, int *installed,
                              const struct sigaction *saved, int *taken)
{
    if (*installed)
        sigaction(sig, saved, NULL);
    *installed = 0;
    *taken = 0;
}
