/*
 * A host that makes processes the ways real programs do, one mode per run,
 * for test/integration/host_lifecycle.sh. Each mode prints what happened on
 * stdout and ends with a known status, so that a run under the agent can
 * be compared with the same run without it. A child that does not end is
 * killed after 30 s and reported "stuck" (the parent exits 1). The same
 * wait is in atfork_alloc.c, the program with its own allocator.
 *
 *   host_lifecycle clone-unshare  a raw clone(CLONE_NEWUSER|SIGCHLD) child
 *                                 (no fork handlers run) calls
 *                                 unshare(CLONE_NEWPID) and exits 0; at once,
 *                                 inside the agent's start delay
 *   host_lifecycle exec-threads MS
 *                                 a child forked at once execs 0.3 s later
 *                                 (this program, mode threads), sleeps MS, prints its own thread
 *                                 count (/proc/self/status) and exits 0 when
 *                                 it is 1, 3 otherwise (Chromium's zygote
 *                                 aborts when it has more than one); the
 *                                 parent exits with the child's status
 *   host_lifecycle seccomp MS     a forked child sleeps MS, installs a
 *                                 seccomp filter through prctl that kills
 *                                 the thread that calls unlink or unlinkat
 *                                 (as sshd's pre-authentication sandbox
 *                                 kills on what it does not allow), prints
 *                                 and exits 0 with exit()
 *   host_lifecycle thread-exit MS a forked child sleeps MS and ends its only
 *                                 thread with the exit system call (not
 *                                 exit_group), as a thread killed alone
 *                                 ends: the process ends with it, status 0
 *   host_lifecycle quick          allocates, frees, prints, exits 0 (for
 *                                 valgrind's leak check)
 *   host_lifecycle until FILE     the same, then lives until FILE exists
 *                                 (60 s at most: exits 4), so that a test
 *                                 can ask its server first; exits 0
 */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reap.h"

/* ---- modes ---------------------------------------------------------------- */

static int mode_clone_unshare(void)
{
    fflush(stdout);
    long pid = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L,
                       0L);
    if (pid < 0) /* no user namespaces here: the same without one */
        pid = syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    if (pid == 0) {
        int r = unshare(CLONE_NEWPID);
        printf("clone child: unshare %s\n", r == 0 ? "ok" : "refused");
        fflush(stdout);
        _exit(0);
    }
    if (pid < 0) {
        printf("clone: %s\n", strerror(errno));
        return 1;
    }
    return reap((pid_t)pid, "clone child") == 0 ? 0 : 1;
}

static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

static int mode_threads(long ms)
{
    sleep_us(ms * 1000L);
    int n = threads_now();
    printf("exec'd child: threads=%d\n", n);
    return n == 1 ? 0 : 3;
}

static int mode_exec_threads(const char *self, const char *ms)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        sleep_us(300000); /* a worker that execs a moment after the fork */
        execl(self, self, "threads", ms, (char *)NULL);
        _exit(127);
    }
    int st = reap(pid, "exec'd child");
    return st < 0 ? 1 : st;
}

static int mode_seccomp(long ms)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        sleep_us(ms * 1000L);
        struct sock_filter code[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                     offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unlink, 2, 0),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unlinkat, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
        };
        struct sock_fprog prog = {sizeof code / sizeof code[0], code};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
            printf("sandboxed child: no filter: %s\n", strerror(errno));
            exit(2);
        }
        printf("sandboxed child: filter on\n");
        exit(0);
    }
    return reap(pid, "sandboxed child") == 0 ? 0 : 1;
}

static int mode_thread_exit(long ms)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        sleep_us(ms * 1000L);
        printf("child: thread exit\n");
        fflush(stdout);
        for (;;)
            syscall(SYS_exit, 0);
    }
    return reap(pid, "child") == 0 ? 0 : 1;
}

/* Lives until path exists: 0, or 4 after 60 s. */
static int mode_until(const char *path)
{
    for (int i = 0; i < 1200; i++) {
        if (access(path, F_OK) == 0)
            return 0;
        sleep_us(50000);
    }
    return 4;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *arg = argc > 2 ? argv[2] : "0";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "clone-unshare") == 0)
        return mode_clone_unshare();
    if (strcmp(mode, "threads") == 0)
        return mode_threads(atol(arg));
    if (strcmp(mode, "exec-threads") == 0)
        return mode_exec_threads("/proc/self/exe", arg);
    if (strcmp(mode, "seccomp") == 0)
        return mode_seccomp(atol(arg));
    if (strcmp(mode, "thread-exit") == 0)
        return mode_thread_exit(atol(arg));
    if (strcmp(mode, "quick") == 0 || strcmp(mode, "until") == 0) {
        char *p = malloc(64);
        strcpy(p, "quick ok");
        puts(p);
        free(p);
        return strcmp(mode, "until") == 0 ? mode_until(arg) : 0;
    }
    fprintf(stderr, "usage: host_lifecycle clone-unshare | "
                    "exec-threads MS | seccomp MS | thread-exit MS | quick | "
                    "until FILE\n");
    return 2;
}
