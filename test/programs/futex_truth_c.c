/*
 * Test host for contention in locks a C program builds itself on the futex
 * system call, called through syscall(), with waits measured here. One
 * thread holds (or signals) in a named function for 10 ms per round while
 * another waits in a named function:
 *   a three-state futex mutex   holder_work / waiter_work      mutex_wait_ns
 *   a priority-inheritance mutex (FUTEX_LOCK_PI, FUTEX_UNLOCK_PI)
 *                               pi_holder_work / pi_waiter_work  pi_wait_ns
 *   a one-shot flag (FUTEX_WAIT, FUTEX_WAKE)
 *                               flag_notify_work / flag_waiter_work flag_wait_ns
 * Throughout, a thread sends SIGUSR1 to both every 200 us, and the handler
 * makes futex calls of its own (a wake, and a wait that returns at once):
 * a handler may interrupt the agent's bookkeeping of a futex call.
 * Prints the measurements and "done", then waits for the file named by its
 * second argument, prints its counters and exits with status 4.
 *
 *   futex_truth_c ROUNDS STOP_FILE
 */
#include <linux/futex.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rounds.h"

static long counter;

static long futex(int *addr, int op, int val)
{
    return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* ---- three-state mutex: 0 free, 1 held, 2 held with waiters ------------- */

static int mu;
static long mutex_wait_ns;

static void futex_mutex_lock(int *m)
{
    int c = 0;
    if (__atomic_compare_exchange_n(m, &c, 1, 0, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED))
        return;
    if (c != 2)
        c = __atomic_exchange_n(m, 2, __ATOMIC_ACQUIRE);
    while (c != 0) {
        futex(m, FUTEX_WAIT_PRIVATE, 2);
        c = __atomic_exchange_n(m, 2, __ATOMIC_ACQUIRE);
    }
}

static void futex_mutex_unlock(int *m)
{
    if (__atomic_exchange_n(m, 0, __ATOMIC_RELEASE) == 2)
        futex(m, FUTEX_WAKE_PRIVATE, 1);
}

static __attribute__((noinline)) void holder_work(int round)
{
    futex_mutex_lock(&mu);
    round_announce(round);
    sleep_us(10000);
    futex_mutex_unlock(&mu);
    counter++;
}

static __attribute__((noinline)) void waiter_work(void)
{
    long t0 = now_ns();
    futex_mutex_lock(&mu);
    mutex_wait_ns += now_ns() - t0;
    futex_mutex_unlock(&mu);
}

/* ---- priority-inheritance mutex: the owner's thread id ------------------- */

static int pi;
static long pi_wait_ns;

static void pi_lock(int *m)
{
    int c = 0, tid = (int)syscall(SYS_gettid);
    if (!__atomic_compare_exchange_n(m, &c, tid, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        futex(m, FUTEX_LOCK_PI_PRIVATE, 0);
}

static void pi_unlock(int *m)
{
    int c = (int)syscall(SYS_gettid);
    if (!__atomic_compare_exchange_n(m, &c, 0, 0, __ATOMIC_RELEASE,
                                     __ATOMIC_RELAXED))
        futex(m, FUTEX_UNLOCK_PI_PRIVATE, 0);
}

static __attribute__((noinline)) void pi_holder_work(int round)
{
    pi_lock(&pi);
    round_announce(round);
    sleep_us(10000);
    pi_unlock(&pi);
    counter++;
}

static __attribute__((noinline)) void pi_waiter_work(void)
{
    long t0 = now_ns();
    pi_lock(&pi);
    pi_wait_ns += now_ns() - t0;
    pi_unlock(&pi);
}

/* ---- one-shot flag: a condition, not a lock ------------------------------ */

static int flag;
static long flag_wait_ns;

static __attribute__((noinline)) void flag_notify_work(int round)
{
    round_announce(round);
    sleep_us(10000);
    __atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
    futex(&flag, FUTEX_WAKE_PRIVATE, 1);
    counter++;
}

static __attribute__((noinline)) void flag_waiter_work(void)
{
    long t0 = now_ns();
    while (__atomic_load_n(&flag, __ATOMIC_ACQUIRE) == 0)
        futex(&flag, FUTEX_WAIT_PRIVATE, 0);
    flag_wait_ns += now_ns() - t0;
    __atomic_store_n(&flag, 0, __ATOMIC_RELAXED);
}

/* ---- signal storm ----------------------------------------------------------- */

static int storm_word;
static volatile int storm_stop;
static pthread_t storm_main;
static long storm_signals;

static void storm_handler(int sig)
{
    (void)sig;
    int saved = errno;
    syscall(SYS_futex, &storm_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    syscall(SYS_futex, &storm_word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
    errno = saved;
}

static void *storm(void *arg)
{
    (void)arg;
    while (!storm_stop) {
        pthread_t targets[2] = {
            storm_main, __atomic_load_n(&rounds_waiter, __ATOMIC_SEQ_CST)};
        for (int i = 0; i < 2; i++)
            if (targets[i] && pthread_kill(targets[i], SIGUSR1) == 0)
                storm_signals++;
        sleep_us(200);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    const char *stop = argc > 2 ? argv[2] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa = {0};
    sa.sa_handler = storm_handler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    storm_main = pthread_self();
    pthread_t st;
    pthread_create(&st, NULL, storm, NULL);

    run_rounds(rounds, holder_work, waiter_work);
    printf("mutex_wait_ns=%ld\n", mutex_wait_ns);
    run_rounds(rounds, pi_holder_work, pi_waiter_work);
    printf("pi_wait_ns=%ld\n", pi_wait_ns);
    run_rounds(rounds, flag_notify_work, flag_waiter_work);
    printf("flag_wait_ns=%ld\n", flag_wait_ns);
    storm_stop = 1;
    pthread_join(st, NULL);
    printf("signals=%s\n", storm_signals > 100 ? "many" : "few");
    printf("done\n");

    while (stop[0] && access(stop, F_OK) != 0)
        sleep_us(20000);
    printf("counter=%ld\n", counter);
    return 4;
}
