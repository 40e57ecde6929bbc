/*
 * The PPROF_DUMP_SIGNAL handler, alone in its file so that
 * test/integration/signal_safety.sh can check everything it calls. It
 * wakes the dump thread (dump.c) with one byte on a non-blocking pipe; a
 * flood of signals only fills the pipe.
 *
 * The pipe is closed when an attached agent detaches (dump_stop): the
 * handler counts itself in dump_signal_running around its read of the
 * write end and its write, and the closer sets the end to -1 first, then
 * waits until no handler runs, so that no handler writes into a number
 * the host may have reused meanwhile.
 *
 * Contexts: the handler runs on any host thread, in signal context.
 */
#include "process/process.h"

#include "agent/core/real.h"
#include "agent/compiler.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

int dump_wake_pipe[2] = {-1, -1};
int dump_signal_running;

PPROF_SIGNAL_SAFE void dump_on_signal(int sig, siginfo_t *si, void *uc)
{
    /* Signal context: one write to a non-blocking pipe, errno kept. */
    (void)sig;
    (void)si;
    (void)uc;
    int saved = errno;
    __atomic_fetch_add(&dump_signal_running, 1, __ATOMIC_SEQ_CST);
    int fd = __atomic_load_n(&dump_wake_pipe[1], __ATOMIC_SEQ_CST);
    if (fd >= 0) {
        char c = 'd';
        ssize_t r = real_write(fd, &c, 1);
        (void)r;
    }
    __atomic_fetch_sub(&dump_signal_running, 1, __ATOMIC_SEQ_CST);
    errno = saved;
}
