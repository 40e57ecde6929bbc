/*
 * A master that forks one worker, which gives up what HAProxy's worker
 * gives up right after the fork, in its order: chroot(DIR), then (when
 * root) setgid and setuid to nobody, then PR_SET_NO_NEW_PRIVS and
 * RLIMIT_NPROC 0, so that it can create no thread or process. For
 * test/integration/worker_drops_privileges.sh.
 *
 *   worker_drop DIR
 *
 * The worker prints whether it can still create a thread (it must not:
 * the limit is the host's), then spins in worker_busy() until killed.
 * The master waits in master_wait() for SIGTERM, then ends the worker with
 * SIGTERM and prints how it ended; exit 0. Output and status are the same
 * with and without the agent.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "block_signal.h"

static volatile unsigned long sink;

__attribute__((noinline)) static void worker_busy(void)
{
    for (;;)
        for (unsigned long i = 0; i < 1000000; i++)
            sink += i * i;
}

static void *nothing(void *arg)
{
    return arg;
}

/* Gives up what HAProxy's worker does; 0 or the step that failed. */
static const char *drop(const char *dir)
{
    if (chroot(dir) != 0 || chdir("/") != 0)
        return "chroot";
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
        return "setuid";
    if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0)
        return "no_new_privs";
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_NPROC, &none) != 0)
        return "setrlimit";
    return NULL;
}

static void worker(const char *dir)
{
    const char *failed = drop(dir);
    if (failed) {
        printf("worker: %s: %s\n", failed, strerror(errno));
        _exit(2);
    }
    pthread_t t;
    int err = pthread_create(&t, NULL, nothing, NULL);
    printf("worker: new thread: %s\n", err ? strerror(err) : "created");
    fflush(stdout);
    /* Ends with the master, whatever ends it (a test that fails kills
     * the master only); after the ID change, which clears it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
    worker_busy();
}

__attribute__((noinline)) static int master_wait(void)
{
    sigset_t set = block_signal(SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    return sig;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: worker_drop DIR\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t set = block_signal(SIGTERM);
    pid_t pid = fork();
    if (pid == 0) {
        /* Never outlives its master (a test killed midway). */
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        worker(argv[1]);
    }
    if (pid < 0)
        return 1;
    master_wait();
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st))
        printf("master: worker killed by signal %d\n", WTERMSIG(st));
    else
        printf("master: worker exited %d\n", WEXITSTATUS(st));
    return 0;
}
