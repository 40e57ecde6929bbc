/*
 * Interposers of the calls that change a process's user or group IDs, its
 * namespaces, its system-call filter, its root folder, its limits or its
 * capabilities.
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
 * - chroot: the announcement, the port file and what profiles read by
 *   path are prepared first (start_before_drop, confine.c); no thread.
 * - setrlimit and prlimit lowering RLIMIT_NPROC: the agent's start happens
 *   first, while the delay runs (start_before_confine): its threads could
 *   not be created after (HAProxy's worker sets 0 once it is nobody).
 * - capset: as an ID change (while root). PR_SET_NO_NEW_PRIVS and a lower
 *   RLIMIT_NOFILE take nothing the agent needs (docs/operations.md).
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
#include "agent/threads/blocked.h"
#include "agent/guard.h"
#include "agent/core/next_symbol.h"
#include "process/process.h"

#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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
        int saved = errno;                                                 \
        if (ret == 0)                                                      \
            blocked_notes_check();                                         \
        if (paused)                                                        \
            start_resume();                                                \
        errno = saved;                                                     \
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
    if (option == PR_SET_DUMPABLE) {
        int ret = real(option, a2, a3, a4, a5);
        int saved = errno;
        blocked_notes_check();
        errno = saved;
        return ret;
    }
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

/* ---- confinement: chroot, a lower RLIMIT_NPROC, capabilities ------------ */

__attribute__((visibility("default"))) int chroot(const char *path)
{
    static int (*real)(const char *);
    if (!real)
        real = (int (*)(const char *))next_symbol("chroot");
    /* What a later start opens by path, opened now: the announcement
     * and the port file (also when not root: a chroot in a user
     * namespace), and what profiles need (confine.c). No thread: a chroot
     * forbids none, and chroot(1) execs at once. */
    before_change();
    if (agent_ready && !agent_tls.in_agent) {
        start_before_drop();
        confine_prepare();
    }
    return real(path);
}

/* 1 when a new soft limit on processes is lower than the one in force and
 * may stop the agent's threads: the kernel holds a process to it unless
 * its real user is root. A root process that sets 0 means to give up root
 * next; one that sets more (a shell's ulimit -u before it execs) is not
 * held to it, and its start waits for the delay as usual. */
static int lowers_nproc(int resource, rlim_t new_cur)
{
    struct rlimit now;
    if (resource != RLIMIT_NPROC || (getuid() == 0 && new_cur > 0))
        return 0;
    return getrlimit(RLIMIT_NPROC, &now) != 0 || new_cur < now.rlim_cur;
}

/* The start, now, before a lower RLIMIT_NPROC (start.c: the starter's
 * work on this thread, when the delay still runs). */
static void before_nproc(void)
{
    if (!agent_ready || agent_tls.in_agent)
        return;
    children_after_fork();
    start_before_confine();
}

/* setrlimit and prlimit, and their 64-bit names (the same functions in a
 * 64-bit C library, separate symbols). Every other limit, and a higher
 * one, goes straight through; a lower RLIMIT_NOFILE needs nothing (the
 * agent's descriptors follow the limit in force: agent/host/fds.c). */
#define LIMIT_HOOK(name, type)                                             \
    __attribute__((visibility("default"))) int name(                       \
        __rlimit_resource_t resource, const struct type *rl)               \
    {                                                                      \
        static int (*real)(__rlimit_resource_t, const struct type *);      \
        if (!real)                                                         \
            real = (int (*)(__rlimit_resource_t, const struct type *))     \
                next_symbol(#name);                                        \
        /* Declared non-null, passed NULL (EFAULT) all the same: the       \
         * compiler must not drop the test. */                             \
        const struct type *p = rl;                                         \
        __asm__("" : "+r"(p));                                             \
        if (p && lowers_nproc((int)resource, (rlim_t)p->rlim_cur))         \
            before_nproc();                                                \
        return real(resource, rl);                                         \
    }
LIMIT_HOOK(setrlimit, rlimit)
LIMIT_HOOK(setrlimit64, rlimit64)

#define PRLIMIT_HOOK(name, type)                                           \
    __attribute__((visibility("default"))) int name(                       \
        pid_t pid, __rlimit_resource_t resource, const struct type *rl,    \
        struct type *old)                                                  \
    {                                                                      \
        static int (*real)(pid_t, __rlimit_resource_t,                     \
                           const struct type *, struct type *);            \
        if (!real)                                                         \
            real = (int (*)(pid_t, __rlimit_resource_t,                    \
                            const struct type *, struct type *))           \
                next_symbol(#name);                                        \
        if (rl && (pid == 0 || pid == (pid_t)syscall(SYS_getpid)) &&       \
            lowers_nproc((int)resource, (rlim_t)rl->rlim_cur))             \
            before_nproc();                                                \
        return real(pid, resource, rl, old);                               \
    }
PRLIMIT_HOOK(prlimit, rlimit)
PRLIMIT_HOOK(prlimit64, rlimit64)

/* capset: a root process that gives up capabilities may no longer create
 * files where root could (the announcement, the port file): prepared
 * first, as for an ID change. It acts on the calling thread only, so the
 * starter need not leave. No header of the C library declares it. */
int capset(void *header, const void *data);
__attribute__((visibility("default"))) int capset(void *header,
                                                  const void *data)
{
    static int (*real)(void *, const void *);
    if (!real)
        real = (int (*)(void *, const void *))next_symbol("capset");
    before_change();
    return real(header, data);
}
