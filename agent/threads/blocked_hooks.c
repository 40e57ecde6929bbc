/*
 * Interposers of the waits no other hook sees, for the notes of a process
 * that is not dumpable (agent/threads/blocked.h): sigwait, sigwaitinfo and
 * sigtimedwait, where a server's signal thread spends its life (MariaDB's,
 * for one). Nothing else: they record nothing for any profile.
 *
 * Entered on every host thread that waits for a signal this way, and
 * possibly from its signal handlers: a load of a flag, the note's few
 * stores once noting is on (async-signal-safe), then the C library's call
 * with the same arguments, result and errno. Never changes what the host
 * sees.
 */
#include "agent/threads/blocked.h"
#include "agent/core/next_symbol.h"

#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*sigwait_fn)(const sigset_t *, int *);
typedef int (*sigwaitinfo_fn)(const sigset_t *, siginfo_t *);
typedef int (*sigtimedwait_fn)(const sigset_t *, siginfo_t *,
                               const struct timespec *);

static sigwait_fn real_sigwait;
static sigwaitinfo_fn real_sigwaitinfo;
static sigtimedwait_fn real_sigtimedwait;

/* The C library's function (looked up on first use, async-signal-safe),
 * or NULL when there is none. */
#define REAL(var, name)                                                        \
    (likely(var) ? var                                                         \
                 : (__atomic_store_n(&var, next_symbol(name),                  \
                                     __ATOMIC_RELEASE),                        \
                    var))

EXPORT int sigwait(const sigset_t *set, int *sig)
{
    sigwait_fn fn = REAL(real_sigwait, "sigwait");
    if (!fn)
        return ENOSYS;
    int n = BLOCKED_ENTER(SYS_rt_sigtimedwait, fn);
    int r = fn(set, sig);
    BLOCKED_LEAVE(n);
    return r;
}

EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
    sigwaitinfo_fn fn = REAL(real_sigwaitinfo, "sigwaitinfo");
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    int n = BLOCKED_ENTER(SYS_rt_sigtimedwait, fn);
    int r = fn(set, info);
    BLOCKED_LEAVE(n);
    return r;
}

EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info,
                        const struct timespec *timeout)
{
    sigtimedwait_fn fn = REAL(real_sigtimedwait, "sigtimedwait");
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    int n = BLOCKED_ENTER(SYS_rt_sigtimedwait, fn);
    int r = fn(set, info, timeout);
    BLOCKED_LEAVE(n);
    return r;
}
