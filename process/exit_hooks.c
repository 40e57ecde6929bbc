/*
 * Interposers of _exit and _Exit. A process that ends through them skips
 * the atexit handler that removes its announcement file (children.c), and
 * a root service's forked child reserves that file in the fork handler
 * (it may give up its rights before its server starts): a child that
 * _exits at once left it behind, one empty file per fork until some other
 * process listed the folder (4,823 files after 5,000 forks in the ops
 * benchmark). exit() is not affected: the C library calls its own _exit
 * directly, after the atexit handlers.
 *
 * Async-signal-safe, as _exit must be: one getpid, at most one unlink,
 * then the C library's _exit. Safe in a vfork child: it shares its
 * parent's memory but not its pid, so it never removes the parent's file.
 */
#include "agent/compiler.h"
#include "agent/core/next_symbol.h"
#include "agent/core/ops.h"
#include "process/process.h"

#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef void (*exit_fn)(int) __attribute__((noreturn));
static exit_fn real_exit;

void exit_hooks_init(void)
{
    real_exit = (exit_fn)next_symbol("_exit");
}

COMMON_PATH static __attribute__((noreturn)) void leave(int status)
{
    rundir_remove();
    exit_fn f = __atomic_load_n(&real_exit, __ATOMIC_RELAXED);
    if (f)
        f(status);
    /* Before the constructor resolved it: the system call itself, as the
     * C library's _exit makes it. */
    for (;;)
        syscall(SYS_exit_group, status);
}

EXPORT COMMON_PATH void _exit(int status)
{
    leave(status);
}

EXPORT COMMON_PATH void _Exit(int status)
{
    leave(status);
}
