/*
 * The deferred start's trigger: a forked child's start is armed and fired
 * by the child's own calls, so that a child that execs or exits early (a
 * shell's command) costs what any preload costs there: no thread, no
 * system call. agent/core/arm.h says which calls fire it and when.
 *
 * Entered from the doors on any host thread. It must never fire from a
 * signal handler (fire() creates a thread): doors a handler may call ask
 * for the thread's signal mask first, and fire only with none blocked.
 * A process made without fork handlers (vfork, a raw clone) shares or
 * copies the armed state: fire() runs only in the process that armed.
 */
#include "agent/core/arm.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/core/clock.h"
#include "agent/guard.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 0: not armed; ARMED; TAKEN: a thread does the start's work itself
 * (arm_take) until arm_taken_done. */
int arm_armed FORK_STATE;
void (*arm_reroute)(int armed);
enum { ARMED = 1, TAKEN = 2 };

/* Written by arm_set before arm_armed, read after it. */
static void (*arm_fire)(void);
static int64_t deadline_ns;
static int arm_pid FORK_STATE;
/* A signal-safe door's next try after one that found signals blocked. */
static int64_t next_try_ns;

#define RETRY_NS 10000000LL

void arm_set(void (*fire)(void), int64_t deadline_mono_ns, int pid)
{
    arm_fire = fire;
    deadline_ns = deadline_mono_ns;
    arm_pid = pid;
    next_try_ns = 0;
    __atomic_store_n(&arm_armed, 1, __ATOMIC_SEQ_CST);
    if (arm_reroute)
        arm_reroute(1);
}

FORK_PATH void arm_clear(void)
{
    FORK_SET_ATOMIC(arm_armed, 0);
    if (arm_reroute)
        arm_reroute(0);
}

int arm_take(void)
{
    int armed = ARMED;
    if (__atomic_load_n(&arm_armed, __ATOMIC_ACQUIRE) != ARMED ||
        (int)real_syscall(SYS_getpid) != arm_pid ||
        !__atomic_compare_exchange_n(&arm_armed, &armed, TAKEN, 0,
                                     __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        return 0;
    if (arm_reroute)
        arm_reroute(0);
    return 1;
}

void arm_taken_done(void)
{
    __atomic_store_n(&arm_armed, 0, __ATOMIC_SEQ_CST);
}

void arm_wait_taken(void)
{
    struct timespec nap = {0, 1000000};
    for (int i = 0; i < 5000 &&
                    __atomic_load_n(&arm_armed, __ATOMIC_ACQUIRE) == TAKEN &&
                    (int)real_syscall(SYS_getpid) == arm_pid;
         i++)
        real_nanosleep(&nap, NULL);
}

/* 1 when the calling thread blocks no signal: not inside a handler
 * (unless one installed with SA_NODEFER and an empty mask). */
static int no_signal_blocked(void)
{
    uint64_t mask = 0;
    return real_syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &mask,
                   sizeof mask) == 0 &&
           mask == 0;
}

static void try_fire(enum arm_kind kind, int signal_safe)
{
    if (kind == ARM_NONE || guard_active() ||
        __atomic_load_n(&arm_armed, __ATOMIC_ACQUIRE) != ARMED)
        return;
    if (kind == ARM_LATE || signal_safe) {
        int64_t now = agent_mono_ns();
        if (kind == ARM_LATE && now < deadline_ns)
            return;
        if (now < __atomic_load_n(&next_try_ns, __ATOMIC_RELAXED))
            return;
        if (signal_safe && !no_signal_blocked()) {
            __atomic_store_n(&next_try_ns, now + RETRY_NS, __ATOMIC_RELAXED);
            return;
        }
    }
    if ((int)real_syscall(SYS_getpid) != arm_pid)
        return;
    int armed = ARMED;
    if (!__atomic_compare_exchange_n(&arm_armed, &armed, 0, 0,
                                     __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
        return; /* another thread fired or took it */
    if (arm_reroute)
        arm_reroute(0);
    guard_enter();
    arm_fire();
    guard_leave();
}

void arm_door(enum arm_kind kind, int signal_safe)
{
    int saved = errno;
    try_fire(kind, signal_safe);
    errno = saved;
}
