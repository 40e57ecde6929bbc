/*
 * The signals the agent borrows from the host: the threads dump's, the
 * wall profile's and the CPU profile's (SIGPROF when the host leaves it
 * alone). The protocol (which signal, chaining in front of a host's
 * handler, telling the agent's deliveries from the host's) is described in
 * agent/host/signals.h; this file takes a signal and gives it back the way it
 * was found. The forwarding itself, in signal context, is
 * signals_forward.c's.
 *
 * Contexts: the agent's workers, when a profile or a dump starts and ends
 * (borrowers are kept apart by held_lock: two of them never pick the same
 * signal); the forking thread, around fork (a timer signal must not
 * interrupt clone(): on kernels that signal from inside the call it
 * restarts for ever); the fork child's reset. Never in a signal handler.
 */
#include "agent/host/sigmask.h"
#include "agent/host/signals.h"
#include "agent/fork_step.h"
#include "agent/spinlock.h"
#include "agent/stacks/stack.h"
#include "agent/core/real.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The handlers of the agent installed on each signal now (NULL: none),
 * so that one borrower never takes another's signal for the host's.
 * Written and read under held_lock by borrowers; cleared without it by the
 * fork child (the only thread there). */
static void *held[NSIG];
static spinlock_t held_lock;

/* The flags a host's handler may carry for the agent to chain in front of
 * it: the agent's handler then runs where and as the host's would. */
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif
#define CHAIN_FLAGS (SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_RESTORER)

/* How sig can be taken: 2 at its default (or ignored, when ign) or left
 * with an agent handler, 1 by
 * chaining in front of the host's handler cur, 0 not at all. */
static int takeable(int sig, int ign, struct sigaction *cur)
{
    if (held[sig] || sigaction(sig, NULL, cur) != 0)
        return 0;
    if (!(cur->sa_flags & SA_SIGINFO) &&
        (cur->sa_handler == SIG_DFL || (ign && cur->sa_handler == SIG_IGN)))
        return 2;
    if (!(cur->sa_flags & SA_SIGINFO) && cur->sa_handler == SIG_IGN)
        return 0;
    /* A handler of the agent's that a host put back after the agent had
     * given the signal back (it saved it with its own sigaction): free,
     * and never a target (a forward to itself would never end). */
    if (stack_is_self((uintptr_t)cur->sa_handler))
        return 2;
    if ((cur->sa_flags & ~CHAIN_FLAGS) || !(cur->sa_flags & SA_RESTART))
        return 0;
    return 1;
}

/* The first signal from first to last that takeable() rates want. */
static int scan(int first, int last, int want, struct sigaction *cur)
{
    int step = first <= last ? 1 : -1;
    for (int sig = first; sig != last + step; sig += step)
        if (takeable(sig, 0, cur) == want)
            return sig;
    return -EAGAIN;
}

static int install(int sig, void (*handler)(int, siginfo_t *, void *),
                   const sigset_t *mask, const struct sigaction *cur,
                   int chain, struct sigaction *saved)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    if (mask)
        sa.sa_mask = *mask;
    else
        sigemptyset(&sa.sa_mask);
    if (chain) {
        sa.sa_flags |= cur->sa_flags & SA_ONSTACK;
        sigorset(&sa.sa_mask, &sa.sa_mask, &cur->sa_mask);
        signals_forward_set(sig, cur);
    } else {
        signals_forward_set(sig, NULL);
    }
    if (sigaction(sig, &sa, saved) != 0)
        return -errno;
    held[sig] = (void *)handler;
    stack_note_handler(sig);
    return sig;
}

int signals_borrow(int first, int last, int prefer,
                   void (*handler)(int, siginfo_t *, void *),
                   const sigset_t *mask, struct sigaction *saved,
                   int *chained)
{
    struct sigaction cur;
    int sig = -EAGAIN, chain = 0;
    spin_lock(&held_lock);
    if (prefer > 0 && takeable(prefer, 1, &cur) == 2)
        sig = prefer;
    if (sig < 0)
        sig = scan(first, last, 2, &cur);
    if (sig < 0) {
        sig = scan(first, last, 1, &cur);
        chain = sig > 0;
    }
    if (sig > 0)
        sig = install(sig, handler, mask, &cur, chain, saved);
    spin_unlock(&held_lock);
    if (chained)
        *chained = sig > 0 && chain;
    return sig;
}

int signals_take_default(int sig, void (*handler)(int, siginfo_t *, void *),
                         struct sigaction *saved)
{
    struct sigaction cur;
    int r;
    spin_lock(&held_lock);
    if (held[sig] == (void *)handler) {
        r = sig; /* a forked child's, inherited with *saved */
    } else if (held[sig]) {
        r = -EAGAIN;
    } else if (sigaction(sig, NULL, &cur) != 0) {
        r = -errno;
    } else if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL) {
        r = install(sig, handler, NULL, &cur, 0, saved);
    } else if (stack_is_self((uintptr_t)cur.sa_handler)) {
        /* An agent handler a host put back after an earlier give-back:
         * given back, the signal goes to its default action. */
        r = install(sig, handler, NULL, &cur, 0, saved);
        if (r > 0) {
            memset(saved, 0, sizeof *saved);
            saved->sa_handler = SIG_DFL;
        }
    } else {
        r = -EBUSY;
    }
    spin_unlock(&held_lock);
    return r;
}

void signals_give_back(int sig, void (*handler)(int, siginfo_t *, void *),
                       const struct sigaction *saved)
{
    spin_lock(&held_lock);
    if (held[sig] == (void *)handler)
        held[sig] = NULL;
    spin_unlock(&held_lock);
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) ||
        cur.sa_sigaction != handler)
        return; /* the host replaced it meanwhile: leave the host's */
    /* At its default, SIG_IGN first discards what is still pending (on a
     * thread that blocked it, or an expiry late), so the default action
     * never sees our signal. A chained signal goes straight back: SIG_IGN
     * would discard the host's own pending deliveries too, and what is
     * left of ours reaches a handler that was receiving them anyway (the
     * timers are gone by now). */
    if (!(saved->sa_flags & SA_SIGINFO) && saved->sa_handler == SIG_DFL) {
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigaction(sig, &ign, NULL);
    }
    sigaction(sig, saved, NULL);
}

/* The mask the forking thread had before the first of the agent's
 * signals was blocked for the fork (the CPU and wall profiles' prepare
 * steps each add theirs; parent and child restore it once). */
static __thread sigset_t fork_saved __attribute__((tls_model("initial-exec")));
static __thread int fork_blocked __attribute__((tls_model("initial-exec")));

FORK_PATH void signals_fork_block(int sig)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, sig);
    if (sigmask_real(SIG_BLOCK, &set, &old) == 0 && !fork_blocked) {
        fork_saved = old;
        fork_blocked = 1;
    }
}

FORK_PATH void signals_fork_restore(void)
{
    if (fork_blocked)
        sigmask_real(SIG_SETMASK, &fork_saved, NULL);
    FORK_SET(fork_blocked, 0);
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
    if (real_syscall(SYS_timer_create, thread_cpu_clock(tid), &sev, &id) != 0)
        return -errno;
    return id;
}

int thread_timer_set(int id, int64_t first, int64_t period)
{
    struct itimerspec its = {
        .it_interval = {period / 1000000000, period % 1000000000},
        .it_value = {first / 1000000000, first % 1000000000},
    };
    return real_syscall(SYS_timer_settime, id, 0, &its, NULL) == 0 ? 0 : -errno;
}

void signals_fork_child_reset(int sig, int *installed,
                              const struct sigaction *saved, int *taken)
{
    if (*installed)
        sigaction(sig, saved, NULL);
    if (sig > 0 && sig < NSIG)
        held[sig] = NULL;
    *installed = 0;
    *taken = 0;
}
