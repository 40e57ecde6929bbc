/*
 * A program that takes its descriptors back, then idles.
 *
 *   fd_takeover close|dup2|exhaust DIR
 *
 * close: closes every descriptor from 3 up; dup2: puts /dev/null over
 * every descriptor that was open from 3 up; exhaust: opens /dev/null until
 * the descriptor limit. Then prints "ready" and idles (a stat of DIR/go
 * every 50 ms) until DIR/go appears; exhaust then closes 64 of its
 * descriptors, prints "freed", and idles until DIR/stop appears. The
 * caller measures the process's CPU time while it idles: any is the
 * agent's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fd_list.h"

static const char *dir;

/* A line on stdout: no descriptor needed, even at the limit. */
static void say(const char *what)
{
    printf("fd_takeover: %s\n", what);
    fflush(stdout);
}

static void wait_for(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    struct timespec nap = {0, 50000000};
    while (stat(path, &st) != 0)
        nanosleep(&nap, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    dir = argv[2];
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (strcmp(argv[1], "close") == 0) {
        for (int fd = 3; fd < (int)rl.rlim_cur; fd++)
            close(fd);
    } else if (strcmp(argv[1], "dup2") == 0) {
        int open_fds[64];
        int n = fd_list(open_fds, 64);
        int null = open("/dev/null", O_RDONLY);
        for (int i = 0; i < n; i++)
            if (open_fds[i] != null && dup2(null, open_fds[i]) != open_fds[i])
                fprintf(stderr, "fd_takeover: dup2 onto %d: %s\n",
                        open_fds[i], strerror(errno));
    } else {
        int last = -1, n = 0;
        for (;;) {
            int fd = open("/dev/null", O_RDONLY);
            if (fd < 0)
                break;
            last = fd;
            n++;
        }
        printf("fd_takeover: %d descriptors opened, up to %d\n", n, last);
        fflush(stdout);
        say("ready");
        wait_for("go");
        for (int i = 0; i < 64 && last - i >= 3; i++)
            close(last - i);
        say("freed");
        wait_for("stop");
        return 0;
    }
    say("ready");
    wait_for("go");
    return 0;
}
