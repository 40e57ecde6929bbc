/*
 * A single-threaded server's shape: it forks a child per request, for as
 * long as it is told, while the agent's threads do their work beside it.
 * Each child first does what a forked backend does at its start and what
 * takes the C library's locks that fork() does not reset (the loader's
 * object list through dl_iterate_phdr, the time zone through localtime_r
 * and gmtime_r, the resolver through getaddrinfo of a numeric address),
 * then exits. A child that has not exited within 20 s is stuck on a lock
 * that some thread of the parent held at the fork: it is counted, killed
 * and named.
 *
 *   fork_storm SECONDS [FORKS [LEAST]]
 *
 * It stops after SECONDS or FORKS forks, whichever comes first, but not
 * before LEAST forks (a loaded machine forks slower), within 4 * SECONDS.
 * Prints "forks N stuck S" at the end; exit status 1 when S > 0.
 */
#include <link.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

static int count_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    ++*(int *)data;
    return 0;
}

/* What the child does before it exits; its status says whether each step
 * saw what it should. */
static int child_work(void)
{
    int objects = 0;
    dl_iterate_phdr(count_object, &objects);
    time_t now = time(NULL);
    struct tm local, utc;
    if (!localtime_r(&now, &local) || !gmtime_r(&now, &utc))
        return 2;
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    if (getaddrinfo("127.0.0.1", "80", &hints, &res) != 0)
        return 3;
    freeaddrinfo(res);
    return objects > 0 ? 0 : 4;
}

/* A little of the parent's own work between two forks (a request). */
static volatile unsigned long sink;
static void parent_work(void)
{
    for (unsigned long i = 0; i < 200000; i++)
        sink += i * i;
}

/* Waits for the child; 1 when it was stuck (then killed). */
static int wait_child(pid_t pid, int *bad)
{
    int st;
    for (int i = 0; i < 20000; i++) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                ++*bad;
            return 0;
        }
        sleep_us(1000);
    }
    printf("child %d stuck for 20 s\n", (int)pid);
    fflush(stdout);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return 1;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    long end = now_ns() + (long)(seconds * 1e9);
    long most = argc > 2 ? atol(argv[2]) : -1;
    long least = argc > 3 ? atol(argv[3]) : 0;
    long last = now_ns() + (long)(4 * seconds * 1e9);
    long forks = 0, stuck = 0;
    int bad = 0;
    while ((now_ns() < end || forks < least) && forks != most && now_ns() < last) {
        parent_work();
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0)
            _exit(child_work());
        forks++;
        stuck += wait_child(pid, &bad);
    }
    printf("forks %ld stuck %ld bad %d\n", forks, stuck, bad);
    return stuck || bad ? 1 : 0;
}
