/*
 * agent/core/loader.c: the fork gate keeps the agent's loader calls apart
 * from fork (a prepare step returns only once no call is inside, a call
 * that comes meanwhile waits for the parent step, a thread's nested
 * entries count once), and a child forked while another thread walks the
 * loader's list in a loop never inherits the loader lock held. And
 * agent/core/clock.c's gmtime_r gives the C library's answer.
 */
#include "harness.h"

#include "agent/core/clock.h"
#include "agent/core/loader.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int step; /* what the thread did last */

static void *hold_then_leave(void *arg)
{
    (void)arg;
    loader_gate_enter();
    loader_gate_enter(); /* nested: one entry */
    __atomic_store_n(&step, 1, __ATOMIC_SEQ_CST);
    loader_gate_leave();
    nap_ms(200);
    __atomic_store_n(&step, 2, __ATOMIC_SEQ_CST);
    loader_gate_leave();
    return NULL;
}

static void *enter_while_closed(void *arg)
{
    (void)arg;
    loader_gate_enter();
    __atomic_store_n(&step, 3, __ATOMIC_SEQ_CST);
    loader_gate_leave();
    return NULL;
}

TEST(prepare_waits_for_calls_inside)
{
    pthread_t t;
    step = 0;
    pthread_create(&t, NULL, hold_then_leave, NULL);
    while (__atomic_load_n(&step, __ATOMIC_SEQ_CST) != 1)
        nap_ms(1);
    loader_fork_prepare();
    /* It returned: the thread had left (its last step before leaving). */
    expect_int_eq(__atomic_load_n(&step, __ATOMIC_SEQ_CST), 2);
    pthread_join(t, NULL);

    /* Closed: a new call waits for the parent step. */
    pthread_create(&t, NULL, enter_while_closed, NULL);
    nap_ms(100);
    expect_int_eq(__atomic_load_n(&step, __ATOMIC_SEQ_CST), 2);
    loader_fork_parent();
    pthread_join(t, NULL);
    expect_int_eq(__atomic_load_n(&step, __ATOMIC_SEQ_CST), 3);
}

static int walking = 1;

static int slow_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    (void)data;
    for (volatile int i = 0; i < 2000; i++)
        ;
    return 0;
}

static void *walk_for_ever(void *arg)
{
    (void)arg;
    while (__atomic_load_n(&walking, __ATOMIC_RELAXED))
        loader_iterate_phdr(slow_object, NULL);
    return NULL;
}

static int count_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    ++*(int *)data;
    return 0;
}

/* 1 when the child exited 0 within 10 s; kills it otherwise. */
static int child_ended(pid_t pid)
{
    int st;
    for (int i = 0; i < 10000; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) && WEXITSTATUS(st) == 0;
        nap_ms(1);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return 0;
}

TEST(child_never_inherits_the_loader_lock)
{
    pthread_atfork(loader_fork_prepare, loader_fork_parent, loader_fork_child);
    pthread_t t;
    pthread_create(&t, NULL, walk_for_ever, NULL);
    int stuck = 0;
    for (int i = 0; i < 400 && !stuck; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            int n = 0;
            dl_iterate_phdr(count_object, &n);
            _exit(n > 0 ? 0 : 1);
        }
        stuck += !child_ended(pid);
    }
    __atomic_store_n(&walking, 0, __ATOMIC_RELAXED);
    pthread_join(t, NULL);
    expect_int_eq(stuck, 0);
}

TEST(gmtime_as_the_c_library)
{
    static const time_t fixed[] = {
        0, -1, 59, 86399, 86400, 951782400 /* 2000-02-29 */, 951868800,
        4107542400 /* 2100-03-01 */, 13574563200 /* 2400-03-01 */,
        -2208988800 /* 1900-01-01 */, 1780000000, 2147483647, 2147483648,
    };
    time_t all[sizeof fixed / sizeof fixed[0] + 2000];
    size_t n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        all[n++] = fixed[i];
    unsigned long long x = 88172645463325252ULL;
    for (int i = 0; i < 2000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        all[n++] = (time_t)(x % 20000000000ULL) - 5000000000LL;
    }
    for (size_t i = 0; i < n; i++) {
        struct tm want, got;
        gmtime_r(&all[i], &want);
        clock_gmtime_r(&all[i], &got);
        expect_true(got.tm_year == want.tm_year && got.tm_mon == want.tm_mon &&
                    got.tm_mday == want.tm_mday && got.tm_hour == want.tm_hour &&
                    got.tm_min == want.tm_min && got.tm_sec == want.tm_sec &&
                    got.tm_wday == want.tm_wday && got.tm_yday == want.tm_yday);
    }
}

int main(void)
{
    return run_tests(prepare_waits_for_calls_inside,
                     child_never_inherits_the_loader_lock,
                     gmtime_as_the_c_library, NULL);
}
