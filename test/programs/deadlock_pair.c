/*
 * Threads that cannot go on, beside one that can: "locker-a" and
 * "locker-b" take two mutexes in opposite orders (take_ab, take_ba) and
 * wait for each other for ever; "reader" holds a third mutex and an rwlock
 * (for writing) while it blocks in read() on a pipe nobody writes
 * and a priority-inheritance futex taken through syscall()
 * (hold_and_read), "waiter" waits for that mutex (wait_behind_reader),
 * "rw-waiter" to read under the rwlock (read_behind_reader) and
 * "pi-waiter" for the futex (lock_pi_behind_reader); two "worker" threads
 * share a
 * fourth mutex, each holding it a millisecond at a time (healthy_work):
 * short waits, never stuck. Prints "started" once every thread is where it
 * stays. Runs until killed.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t c = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t d = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static unsigned pi_word; /* 0 free, else the holder's id (the kernel's) */
static pthread_barrier_t both_hold;
static int pipe_fds[2];
static volatile int reader_holds;

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&ts, NULL);
}

__attribute__((noinline)) static void take_ab(void)
{
    pthread_mutex_lock(&a);
    pthread_barrier_wait(&both_hold);
    pthread_mutex_lock(&b);
}

__attribute__((noinline)) static void take_ba(void)
{
    pthread_mutex_lock(&b);
    pthread_barrier_wait(&both_hold);
    pthread_mutex_lock(&a);
}

__attribute__((noinline)) static void hold_and_read(void)
{
    char byte;
    pthread_mutex_lock(&c);
    pthread_rwlock_wrlock(&rw);
    syscall(SYS_futex, &pi_word, FUTEX_LOCK_PI_PRIVATE, 0, NULL, NULL, 0);
    reader_holds = 1;
    while (read(pipe_fds[0], &byte, 1) != 0)
        ;
}

__attribute__((noinline)) static void wait_behind_reader(void)
{
    while (!reader_holds)
        nap_ms(1);
    pthread_mutex_lock(&c);
}

__attribute__((noinline)) static void read_behind_reader(void)
{
    while (!reader_holds)
        nap_ms(1);
    pthread_rwlock_rdlock(&rw);
}

__attribute__((noinline)) static void lock_pi_behind_reader(void)
{
    while (!reader_holds)
        nap_ms(1);
    syscall(SYS_futex, &pi_word, FUTEX_LOCK_PI_PRIVATE, 0, NULL, NULL, 0);
}

__attribute__((noinline)) static void healthy_work(void)
{
    for (;;) {
        pthread_mutex_lock(&d);
        nap_ms(1);
        pthread_mutex_unlock(&d);
        nap_ms(1);
    }
}

static void *run(void *arg)
{
    const char *name = arg;
    pthread_setname_np(pthread_self(), name);
    switch (name[0]) {
    case 'l': name[7] == 'a' ? take_ab() : take_ba(); break;
    case 'r': name[1] == 'e' ? hold_and_read() : read_behind_reader(); break;
    case 'w': name[1] == 'a' ? wait_behind_reader() : healthy_work(); break;
    case 'p': lock_pi_behind_reader(); break;
    }
    return NULL;
}

int main(void)
{
    static char *names[] = {"locker-a", "locker-b", "reader", "waiter",
                            "rw-waiter", "pi-waiter", "worker", "worker"};
    if (pipe(pipe_fds) != 0)
        return 1;
    pthread_barrier_init(&both_hold, NULL, 2);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        pthread_t t;
        pthread_create(&t, NULL, run, names[i]);
    }
    /* Everyone is in place once the reader holds its mutex and the lockers
     * passed their barrier (a moment later they block for good). */
    while (!reader_holds)
        nap_ms(1);
    nap_ms(50);
    printf("started\n");
    fflush(stdout);
    for (;;)
        pause();
}
