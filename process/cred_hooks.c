/*
 * Interposers of the calls that change a process's user or group IDs, its
 * namespaces or its system-call filter.
 * - A root service that gives up root before its server starts (start.c)
 *   could no longer create its announcement file or its port file: the
 *   hooks have them created first (start_before_drop).
 * - While the start delay runs, the agent's one thread (the starter) is
 *   away for the call (start_pause): the C library applies ID changes to
 *   every thread and aborts the process if one cannot follow (setpriv
 *   gives only its own thread the capability it needs), and a new user
 *   namespace needs a process of one thread (unshare -r).
 * - prctl(PR_SET_SECCOMP): from then on a forbidden system call kills
 *   (sshd's pre-authentication child): the agent notes it (agent_sandboxed:
 *   no optional system call any more, no announcement removed at exit)
 *   and its waiting thread leaves for good, so the filter meets a process
 *   of one thread, whose end ends the process. Only when the filter went
 *   in: a failed call (Firefox's probe with a NULL filter) changes nothing
 *   and the waiting thread comes back.
 * - The fork after step (children_after_fork), for a child whose fork the
 *   agent did not see return: a cheap test, before anything else.
 * Then the C library's call; nothing else changes: same arguments, result
 * and errno.
 *
 * Entered on any host thread, also in a forked child before exec (where
 * start_before_drop does nothing). setuid and setgid are async-signal-safe
 * in POSIX; a call from a signal handler, or on a thread inside the
 * agent, goes straight to the C library.
 */
#include "agent/guard.h"
#include "agent/next_symbol.h"
#include "process/process.h"

#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Only while root: an unprivileged process keeps its rights to its own
 * files whatever IDs it takes. Once per process (a forked child is another
 * one), cheaply. */
static void before_change(void)
{
    static int done_in; /* the pid it ran in */
    if (!agent_ready || agent_tls.in_agent)
        return;
    children_after_fork();
    int pid = (int)syscall(SYS_getpid);
    if (done_in == pid || geteuid() != 0)
        return;
    done_in = pid;
    start_before_drop();
}

/* The real call, with the agent's waiting thread away while it runs
 * (start_pause, start.c); errno is the call's. */
#define CRED_HOOK(name, params, args)                                      \
    __attribute__((visibility("default"))) int name params                 \
    {                                                                      \
        static int (*real) params;                                         \
        if (!real)                                                         \
            real = (int (*) params)next_symbol(#name);                     \
        before_change();                                                   \
        int paused = start_pause();                                        \
        int ret = real args;                                               \
        if (paused) {                                                      \
            int saved = errno;                                             \
            start_resume();                                                \
            errno = saved;                                                 \
        }                                                                  \
        return ret;                                                        \
    }

CRED_HOOK(setuid, (uid_t uid), (uid))
CRED_HOOK(setgid, (gid_t gid), (gid))
CRED_HOOK(seteuid, (uid_t uid), (uid))
CRED_HOOK(setegid, (gid_t gid), (gid))
CRED_HOOK(setreuid, (uid_t r, uid_t e), (r, e))
CRED_HOOK(setregid, (gid_t r, gid_t e), (r, e))
CRED_HOOK(setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))
CRED_HOOK(setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))
CRED_HOOK(setgroups, (size_t n, const gid_t *list), (n, list))
CRED_HOOK(initgroups, (const char *user, gid_t group), (user, group))
/* Namespaces: a new user namespace, and entering some, need the process
 * to have one thread. */
CRED_HOOK(unshare, (int flags), (flags))
CRED_HOOK(setns, (int fd, int type), (fd, type))

/* prctl: PR_SET_SECCOMP makes the waiting starter leave first, and notes
 * the sandbox when the call installed a filter (it returned 0); a failed
 * call gets the starter back. Every other option goes straight through.
 * The C library reads four more arguments whatever the option. */
__attribute__((visibility("default"))) int prctl(int option, ...)
{
    static int (*real)(int, ...);
    if (!real)
        real = (int (*)(int, ...))next_symbol("prctl");
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long);
    unsigned long a3 = va_arg(ap, unsigned long);
    unsigned long a4 = va_arg(ap, unsigned long);
    unsigned long a5 = va_arg(ap, unsigned long);
    va_end(ap);
    if (option != PR_SET_SECCOMP || !agent_ready || agent_tls.in_agent)
        return real(option, a2, a3, a4, a5);
    /* The starter leaves before a filter can go in; only a filter that
     * went in keeps it away (a failed probe gets it back). */
    sandbox_attempt_begin();
    int paused = start_pause();
    int ret = real(option, a2, a3, a4, a5);
    int saved = errno;
    sandbox_attempt_end(ret == 0);
    if (paused && ret != 0)
        start_resume();
    errno = saved;
    return ret;
}
