/*
 * A program that keeps taking its descriptors back while it runs, as a
 * daemon's connection handler or a careless library might: every 5 ms it
 * closes everything from 3 up (close_range), opens a few files (which get
 * the low numbers back) and puts /dev/null over 3..63 with dup2.
 *
 *   fd_sweep SECONDS [FILE]
 *
 * With FILE, the first file it opens is FILE, for writing (so the dup2
 * puts it over 3..63): it writes nothing there itself, and at the end
 * prints its size ("written=N"), which anything else writing to one of
 * its descriptors would make non-zero.
 * Prints "fd_sweep: N rounds" and exits 0 after SECONDS, or at SIGUSR1.
 */
#include <sys/stat.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* SIGUSR1: the test is done. The handler only sets the flag. */
static volatile sig_atomic_t done;
static void on_usr1(int sig)
{
    (void)sig;
    done = 1;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? (double)atoi(argv[1]) : 10;
    double end = now() + secs;
    long rounds = 0;
    signal(SIGUSR1, on_usr1);
    while (now() < end && !done) {
        close_range(3, ~0U, 0);
        int fds[4];
        for (int i = 0; i < 4; i++)
            fds[i] = i == 0 && argc > 2
                         ? open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0600)
                         : open("/dev/null", O_RDONLY);
        for (int fd = 3; fd < 64; fd++)
            dup2(fds[0], fd);
        struct timespec nap = {0, 5000000};
        nanosleep(&nap, NULL);
        rounds++;
    }
    struct stat st;
    if (argc > 2)
        printf("written=%lld\n",
               stat(argv[2], &st) == 0 ? (long long)st.st_size : -1LL);
    printf("fd_sweep: %ld rounds\n", rounds);
    return 0;
}
