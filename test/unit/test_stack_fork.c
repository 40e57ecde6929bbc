/*
 * The fork gate around libunwind (agent/stack_fork.c): fork() does not go
 * ahead while another thread is inside the unwinder, nobody enters it while
 * a fork is being prepared (a capture then returns no stack at once rather
 * than waiting), and both the parent and the child unwind again afterwards.
 */
#include "agent/agent.h"
#include "agent/cpu.h"
#include "harness.h"

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile int in_gate;
static volatile double left_at;

static void *unwinder(void *arg)
{
    (void)arg;
    if (!stack_unwind_enter())
        return NULL;
    in_gate = 1;
    usleep(300 * 1000); /* as if preempted inside libunwind */
    left_at = now();
    stack_unwind_leave();
    return NULL;
}

/* Registered before the gate, so it runs after the gate's prepare. */
static int prepare_entered = -1, prepare_captured = -1;
static int prepare_waiters = -1;
static void late_prepare(void)
{
    prepare_waiters = __atomic_load_n(&stack_unwinders, __ATOMIC_SEQ_CST);
    prepare_entered = stack_unwind_enter();
    if (prepare_entered)
        stack_unwind_leave();
    uintptr_t pcs[16];
    prepare_captured = stack_capture(pcs, 16);
}

TEST(fork_waits_for_the_unwinder)
{
    pthread_t t;
    assert_true(pthread_create(&t, NULL, unwinder, NULL) == 0);
    while (!in_gate)
        usleep(1000);
    pid_t pid = fork();
    if (pid == 0) {
        uintptr_t pcs[16];
        int ok = stack_unwinders == 0 && !stack_unwind_closed &&
                 stack_capture(pcs, 16) > 0;
        _exit(ok ? 0 : 1);
    }
    double forked_at = now();
    assert_true(pid > 0);
    expect_true(left_at > 0 && forked_at >= left_at);
    expect_int_eq(prepare_waiters, 0);
    expect_int_eq(prepare_entered, 0);
    expect_int_eq(prepare_captured, 0);
    int status = 0;
    expect_int_eq(waitpid(pid, &status, 0), pid);
    expect_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pthread_join(t, NULL);
    /* The parent unwinds again. */
    uintptr_t pcs[16];
    expect_true(stack_capture(pcs, 16) > 0);
    expect_int_eq(stack_unwinders, 0);
}

static volatile int reading, stop_reading;

/* Stands for a CPU handler on another thread, inside the snapshot. */
static void *phdr_reader(void *arg)
{
    (void)arg;
    __atomic_fetch_add(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    reading = 1;
    while (!stop_reading)
        usleep(1000);
    __atomic_fetch_sub(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

TEST(child_forgets_the_parents_readers)
{
    pthread_t t;
    assert_true(pthread_create(&t, NULL, phdr_reader, NULL) == 0);
    while (!reading)
        usleep(1000);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5); /* waiting for a reader that is not here: killed */
        phdr_unload_enter(); /* what dlclose does */
        phdr_unload_leave();
        _exit(cpu_phdr_readers == 0 && cpu_phdr_busy == 0 ? 0 : 1);
    }
    assert_true(pid > 0);
    int status = 0;
    expect_int_eq(waitpid(pid, &status, 0), pid);
    expect_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    stop_reading = 1;
    pthread_join(t, NULL);
}

TEST(no_fork_no_gate)
{
    expect_int_eq(stack_unwind_enter(), 1);
    expect_int_eq(agent_tls.unwinding, 1);
    stack_unwind_leave();
    expect_int_eq(agent_tls.unwinding, 0);
    expect_int_eq(stack_unwinders, 0);
}

int main(void)
{
    pthread_atfork(late_prepare, NULL, NULL);
    stack_fork_init();
    stack_init();
    return run_tests(no_fork_no_gate, fork_waits_for_the_unwinder,
                     child_forgets_the_parents_readers, NULL);
}
