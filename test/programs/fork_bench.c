/*
 * fork cost for the operations benchmark: N times fork() and wait, the
 * child either ending at once (_exit) or exec'ing /bin/true. Prints the
 * mean CPU time per child, parent and child together (user + system, from
 * getrusage: steadier than wall time on a busy machine), and the mean
 * wall time, in microseconds: "cpu_us=<x> wall_us=<y>".
 *
 *   fork_bench exit|exec N
 *   fork_bench hold N SECS    N children that sleep SECS seconds each (a
 *                             prefork server's workers), then end
 *   fork_bench daemon SECS    forks; the parent exits at once, the child
 *                             (the daemon) sleeps SECS seconds
 *   fork_bench family SECS    a whole service family, each member sleeping
 *                             SECS seconds: one worker (fork), a daemon
 *                             (fork, setsid, fork: re-parented to init or
 *                             a subreaper) and an exec'd "hold 1 SECS" with
 *                             its own worker
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int exec_child = strcmp(argv[1], "exec") == 0;
    int n = atoi(argv[2]);
    if (strcmp(argv[1], "daemon") == 0) {
        pid_t pid = fork();
        if (pid != 0)
            exit(pid < 0);
        sleep((unsigned)n);
        return 0;
    }
    if (strcmp(argv[1], "family") == 0) {
        if (fork() == 0) {
            sleep((unsigned)n);
            _exit(0);
        }
        pid_t mid = fork();
        if (mid == 0) {
            setsid();
            if (fork() == 0) {
                sleep((unsigned)n);
                _exit(0);
            }
            _exit(0);
        }
        waitpid(mid, NULL, 0);
        char self[4096];
        ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
        if (len > 0 && fork() == 0) {
            self[len] = '\0';
            char *args[] = {argv[0], "hold", "1", argv[2], NULL};
            execv(self, args);
            _exit(127);
        }
        while (wait(NULL) > 0)
            ;
        return 0;
    }
    if (strcmp(argv[1], "hold") == 0 && argc > 3) {
        int secs = atoi(argv[3]);
        for (int i = 0; i < n; i++) {
            if (fork() == 0) {
                sleep((unsigned)secs);
                _exit(0);
            }
        }
        while (wait(NULL) > 0)
            ;
        return 0;
    }
    double t0 = now();
    double c0 = cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            if (exec_child) {
                char *args[] = {"true", NULL};
                execv("/bin/true", args);
            }
            _exit(0);
        }
        if (pid < 0)
            return 1;
        int status;
        waitpid(pid, &status, 0);
    }
    double c1 = cpu_s(RUSAGE_SELF) + cpu_s(RUSAGE_CHILDREN);
    printf("cpu_us=%.1f wall_us=%.1f\n", (c1 - c0) / n * 1e6,
           (now() - t0) / n * 1e6);
    return 0;
}
