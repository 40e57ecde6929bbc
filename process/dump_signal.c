/*
 * The PPROF_DUMP_SIGNAL handler, alone in its file so that
 * test/integration/signal_safety.sh can check everything it calls. It
 * wakes the dump thread (dump.c) with one byte on a non-blocking pipe; a
 * flood of signals only fills the pipe.
 *
 * Contexts: the handler runs on any host thread, in signal context.
 */
#include "process/process.h"
#include "agent/core/real.h"

#include "agent/compiler.h"

#include <errno.h>
#include <unistd.h>

int dump_wake_pipe[2] = {-1, -1};

PPROF_SIGNAL_SAFE void dump_on_signal(int sig)
{
    /* Signal context: one write to a non-blocking pipe, errno kept. */
    (void)sig;
    int saved = errno;
    char c = 'd';
    ssize_t r = real_write(dump_wake_pipe[1], &c, 1);
    (void)r;
    errno = saved;
}
