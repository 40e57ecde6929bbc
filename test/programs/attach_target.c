/*
 * A host for pprof-attach, started without the agent: its threads exist
 * before any attach and each checks that the calls it makes come back as
 * they should, however often it is stopped and made to call something.
 *
 *   main      sleeps 5 ms at a time (nanosleep: a restarted sleep) and
 *             checks each slept its time and returned 0
 *   "spinner" spins in busy_spin
 *   "reader"  blocks in read() on a pipe; main writes a byte every 20
 *             rounds, which it must read back in order
 *   "waiter"  blocks in pthread_cond_wait, woken with the same byte
 *   "worker", "holder"  allocate and contend on SIGUSR1, free on SIGUSR2
 *             (attach_work.h)
 *
 * It runs until the file argv[1] exists, then prints
 * "rounds_ok eintr=N short=N bad=N" and exits 0 (1 if any is not 0).
 * Every check that fails is also printed as it happens.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "attach_work.h"
#include "spin.h"
#include "timing.h"

static int pipe_fds[2];
static int eintr, shorts, bad;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned char posted, taken;

static void count(int *what, const char *text)
{
    __atomic_fetch_add(what, 1, __ATOMIC_SEQ_CST);
    printf("%s\n", text);
    fflush(stdout);
}

__attribute__((noinline)) void busy_spin(void)
{
    for (;;)
        spin(100000);
}

static void *spinner(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "spinner");
    busy_spin();
    return NULL;
}

__attribute__((noinline)) static void read_in_order(void)
{
    unsigned char want = 0, c;
    for (;;) {
        ssize_t n = read(pipe_fds[0], &c, 1);
        if (n < 0 && errno == EINTR) {
            count(&eintr, "EINTR in read");
            continue;
        }
        if (n != 1 || c != want)
            count(&bad, "read: wrong byte or result");
        want = (unsigned char)(c + 1);
    }
}

static void *reader(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "reader");
    read_in_order();
    return NULL;
}

__attribute__((noinline)) static void wait_in_cond(void)
{
    pthread_mutex_lock(&lock);
    for (;;) {
        while (taken == posted)
            pthread_cond_wait(&cond, &lock);
        taken++;
    }
}

static void *waiter(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "waiter");
    wait_in_cond();
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || pipe(pipe_fds) != 0 || work_start() != 0)
        return 2;
    pthread_t t;
    pthread_create(&t, NULL, spinner, NULL);
    pthread_create(&t, NULL, reader, NULL);
    pthread_create(&t, NULL, waiter, NULL);
    printf("started\n");
    fflush(stdout);
    unsigned char next = 0;
    for (long round = 1; access(argv[1], F_OK) != 0; round++) {
        struct timespec nap = {0, 5000000};
        long t0 = now_ns();
        int r = nanosleep(&nap, NULL);
        long slept = now_ns() - t0;
        if (r != 0 && errno == EINTR)
            count(&eintr, "EINTR in nanosleep");
        else if (r != 0)
            count(&bad, "nanosleep failed");
        else if (slept < 5000000)
            count(&shorts, "nanosleep returned early");
        if (round % 20 == 0) {
            if (write(pipe_fds[1], &next, 1) != 1)
                count(&bad, "write failed");
            next++;
            pthread_mutex_lock(&lock);
            posted++;
            pthread_cond_signal(&cond);
            pthread_mutex_unlock(&lock);
        }
    }
    printf("rounds_ok eintr=%d short=%d bad=%d\n", eintr, shorts, bad);
    return eintr || shorts || bad;
}
