/*
 * For the host-lifecycle test programs: the wait for a child that says how
 * it ended (or that it never did).
 */
#ifndef PPROF_TEST_REAP_H
#define PPROF_TEST_REAP_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "timing.h"

/* Waits for child pid (30 s at most, then kills it); prints how it ended
 * as "WHAT: exited N", "WHAT: killed by signal N" or "WHAT: stuck".
 * Returns the exit status, or -1. */
static int reap(pid_t pid, const char *what)
{
    int st = 0;
    for (int i = 0; i < 3000; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (WIFEXITED(st)) {
                printf("%s: exited %d\n", what, WEXITSTATUS(st));
                return WEXITSTATUS(st);
            }
            printf("%s: killed by signal %d\n", what, WTERMSIG(st));
            return -1;
        }
        if (r < 0) {
            printf("%s: waitpid: %s\n", what, strerror(errno));
            return -1;
        }
        sleep_us(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    printf("%s: stuck\n", what);
    return -1;
}

#endif
