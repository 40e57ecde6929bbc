/*
 * Forwarding the host's deliveries of a signal the agent chained in front
 * of (agent/host/signals.h has the protocol): the one piece of the protocol that
 * runs in signal context.
 *
 * Context: the agent's handlers, on any host thread, on the stack and with
 * the mask the host's own handler would have had (the borrow copied its
 * SA_ONSTACK and its mask). Only async-signal-safe code, no lock, no
 * allocation; errno is the host handler's to keep (forwarding happens before
 * the agent's handler saves it, as the host's handler would have found it).
 *
 * The target is published in one of two slots per signal and switched by
 * an index, so that a handler reading while a borrower writes the next
 * target sees one whole action (a host's handler address with its flags),
 * never half of each: a borrower writes the slot not in use, then the
 * index. Borrows of one signal follow each other seconds apart at least
 * (a session's start and end), far longer than any handler runs.
 */
#include "agent/compiler.h"
#include "agent/host/signals.h"
#include "agent/stacks/stack.h"

#include <signal.h>
#include <stddef.h>

struct forward_target {
    void (*fn)(int, siginfo_t *, void *); /* NULL: nothing */
    int siginfo; /* fn takes (sig, si, uc); else (sig) only */
};

static struct forward_target targets[NSIG][2];
static int current[NSIG]; /* which of the two slots is in force */

void signals_forward_set(int sig, const struct sigaction *prev)
{
    if (sig <= 0 || sig >= NSIG)
        return;
    int next = !__atomic_load_n(&current[sig], __ATOMIC_RELAXED);
    struct forward_target t = {NULL, 0};
    if (prev && (prev->sa_flags & SA_SIGINFO)) {
        t.fn = prev->sa_sigaction;
        t.siginfo = 1;
    } else if (prev && prev->sa_handler != SIG_DFL &&
               prev->sa_handler != SIG_IGN) {
        t.fn = (void (*)(int, siginfo_t *, void *))(void *)prev->sa_handler;
    }
    if (stack_is_self((uintptr_t)t.fn))
        t.fn = NULL; /* the agent's own: a forward would never end */
    targets[sig][next] = t;
    __atomic_store_n(&current[sig], next, __ATOMIC_RELEASE);
}

PPROF_SIGNAL_SAFE void signals_forward(int sig, siginfo_t *si, void *uc)
{
    if (sig <= 0 || sig >= NSIG)
        return;
    int i = __atomic_load_n(&current[sig], __ATOMIC_ACQUIRE);
    struct forward_target t = targets[sig][i];
    if (!t.fn)
        return;
    if (t.siginfo)
        t.fn(sig, si, uc);
    else
        ((void (*)(int))(void *)t.fn)(sig);
}
