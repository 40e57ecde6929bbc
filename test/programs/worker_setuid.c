/*
 * A root master with two workers that leave root right after the fork, as
 * nginx's do: one switches to nobody and ends by exit() when told, the
 * other is killed by a signal. For test/integration/rundir_workers_gone.sh.
 *
 *   worker_setuid
 *
 * Each worker prints "worker N: uid U" once it runs as nobody, then sleeps
 * in worker_wait() until SIGTERM (nginx's workers wait in epoll_wait: a
 * waiting call, which starts a forked child's server). The master waits for SIGTERM, then ends the first
 * worker with SIGTERM (it exits 0) and the second with SIGKILL, reaps
 * both, prints how each ended and exits 0. Output and status are the same
 * with and without the agent.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "block_signal.h"

static volatile sig_atomic_t told;

static void on_term(int sig)
{
    told = sig;
}

__attribute__((noinline)) static void worker_wait(void)
{
    while (!told)
        usleep(20000);
}

static void worker(int n, const sigset_t *set)
{
    if (setgid(65534) != 0 || setuid(65534) != 0) {
        perror("setuid");
        _exit(2);
    }
    /* Never outlives its master (a test killed midway); after the ID
     * change, which clears it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
    signal(SIGTERM, on_term);
    sigprocmask(SIG_UNBLOCK, set, NULL);
    printf("worker %d: uid %d\n", n, (int)getuid());
    worker_wait();
    exit(0);
}

static void reap(int n, pid_t pid)
{
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st))
        printf("master: worker %d killed by signal %d\n", n, WTERMSIG(st));
    else
        printf("master: worker %d exited %d\n", n, WEXITSTATUS(st));
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "worker_setuid: needs root\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t set = block_signal(SIGTERM);
    pid_t pids[2];
    for (int n = 0; n < 2; n++) {
        pids[n] = fork();
        if (pids[n] == 0)
            worker(n + 1, &set);
        if (pids[n] < 0)
            return 1;
    }
    int sig = 0;
    sigwait(&set, &sig);
    kill(pids[0], SIGTERM);
    reap(1, pids[0]);
    kill(pids[1], SIGKILL);
    reap(2, pids[1]);
    return 0;
}
