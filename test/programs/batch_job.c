/*
 * A batch job for the dump tests: keeps 8 MiB live in 1 KiB blocks from
 * keep_blocks(), burns CPU in crunch() for about CPU_MS of CPU time, then
 * ends the way it is told:
 *
 *   batch_job return CPU_MS      returns from main
 *   batch_job exit CPU_MS        calls exit(3)
 *   batch_job wait CPU_MS SECS   sleeps SECS seconds, then returns
 *   batch_job own-usr1 CPU_MS SECS  installs its own SIGUSR1 handler, which
 *                                prints "usr1 N" at the end, then waits
 *
 * Prints "done" on stdout before it ends.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static volatile sig_atomic_t usr1_count;
static void *kept[8192];

__attribute__((noinline)) static void keep_blocks(void)
{
    for (int i = 0; i < 8192; i++) {
        kept[i] = malloc(1024);
        memset(kept[i], i, 1024);
    }
}

static long long cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

__attribute__((noinline)) static void crunch(long long ms)
{
    long long end = cpu_ms() + ms;
    while (cpu_ms() < end)
        for (int i = 0; i < 100000; i++)
            sink += (unsigned long)i * 2654435761u;
}

static void on_usr1(int sig)
{
    (void)sig;
    usr1_count++;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *mode = argv[1];
    long long ms = atoll(argv[2]);
    int secs = argc > 3 ? atoi(argv[3]) : 0;
    if (strcmp(mode, "own-usr1") == 0)
        signal(SIGUSR1, on_usr1);
    keep_blocks();
    crunch(ms);
    if (strcmp(mode, "wait") == 0 || strcmp(mode, "own-usr1") == 0) {
        for (int i = 0; i < secs * 10; i++)
            usleep(100000);
    }
    if (strcmp(mode, "own-usr1") == 0)
        printf("usr1 %d\n", (int)usr1_count);
    printf("done\n");
    fflush(stdout);
    if (strcmp(mode, "exit") == 0)
        exit(3);
    return 0;
}
