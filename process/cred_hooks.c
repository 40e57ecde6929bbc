/*
 * Interposers of the calls that change a process's user or group IDs.
 * A root service that gives up root before its server starts (start.c)
 * could no longer create its announcement file or its port file: the
 * hooks have them created first (start_before_drop), then call the C
 * library. Nothing else changes: same arguments, result and errno.
 *
 * Entered on any host thread, also in a forked child before exec (where
 * start_before_drop does nothing). setuid and setgid are async-signal-safe
 * in POSIX; a call from a signal handler, or on a thread inside the
 * agent, goes straight to the C library.
 */
#include "agent/agent.h"
#include "process/process.h"

#include <dlfcn.h>
#include <unistd.h>

/* Only while root: an unprivileged process keeps its rights to its own
 * files whatever IDs it takes. Once per process, cheaply. */
static void before_change(void)
{
    static int done;
    if (done || !agent_ready || agent_tls.in_agent || geteuid() != 0)
        return;
    done = 1;
    start_before_drop();
}

#define CRED_HOOK(name, params, args)                                      \
    __attribute__((visibility("default"))) int name params                 \
    {                                                                      \
        static int (*real) params;                                         \
        if (!real)                                                         \
            real = (int (*) params)dlsym(RTLD_NEXT, #name);                 \
        before_change();                                                   \
        return real args;                                                  \
    }

CRED_HOOK(setuid, (uid_t uid), (uid))
CRED_HOOK(setgid, (gid_t gid), (gid))
CRED_HOOK(seteuid, (uid_t uid), (uid))
CRED_HOOK(setegid, (gid_t gid), (gid))
CRED_HOOK(setreuid, (uid_t r, uid_t e), (r, e))
CRED_HOOK(setregid, (gid_t r, gid_t e), (r, e))
CRED_HOOK(setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s))
CRED_HOOK(setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s))
