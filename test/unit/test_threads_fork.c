/*
 * A child forked while a thread of the parent is in the middle of a
 * thread-stack dump (threads_dump holds its lock and has borrowed a
 * real-time signal): after threads_fork_child() the child's own dump runs
 * to the end, and the borrowed signal is back at its default.
 *
 * The dump is made to last: a busy thread marked as the agent's (but not
 * known to it as such) is asked for its stack and its handler does not
 * answer, so the dump waits THREADS_WAIT_MS for it; the fork lands well
 * inside that window, once the dump has borrowed its signal.
 */
#include "agent/guard.h"
#include "agent/stacks/stack.h"
#include "agent/threads/threads.h"
#include "harness.h"

#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Set by phdr_hooks.c in the shared object. */
extern int (*real_dl_iterate_phdr)(int (*)(struct dl_phdr_info *, size_t,
                                           void *),
                                   void *);

/* Flags between threads: atomic, so that ThreadSanitizer sees the order. */
static int dumping, spinning, stop;

static void *silent_spinner(void *arg)
{
    (void)arg;
    agent_tls.agent_thread = 1;
    __atomic_store_n(&spinning, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&stop, __ATOMIC_SEQ_CST))
        ;
    return NULL;
}

static void *dumper(void *arg)
{
    (void)arg;
    agent_tls.agent_thread = 1;
    struct thread_dump d;
    __atomic_store_n(&dumping, 1, __ATOMIC_SEQ_CST);
    if (threads_dump(&d) == 0)
        threads_dump_free(&d);
    return NULL;
}

/* Flags between threads: atomic, so that ThreadSanitizer sees the order. */
static int spinning_here;

static void *spinner(void *arg)
{
    (void)arg;
    stack_thread_prepare(); /* the thread-start hook's job */
    __atomic_store_n(&spinning_here, (int)gettid(), __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&stop, __ATOMIC_SEQ_CST))
        ;
    return NULL;
}

/* The real-time signals the dump may borrow that are not at SIG_DFL. */
static int borrowed_signals(void)
{
    int n = 0;
    for (int sig = SIGRTMIN + 4; sig <= SIGRTMAX; sig++) {
        struct sigaction cur;
        if (sigaction(sig, NULL, &cur) == 0 &&
            (cur.sa_handler != SIG_DFL || (cur.sa_flags & SA_SIGINFO)))
            n++;
    }
    return n;
}

enum { CHILD_OK, CHILD_NOT_MID_DUMP, CHILD_SIGNAL_KEPT, CHILD_DUMP_FAILED };

static int child(void)
{
    alarm(5); /* a dump lock still held would wait forever */
    if (borrowed_signals() != 1)
        return CHILD_NOT_MID_DUMP;
    threads_fork_child();
    if (borrowed_signals() != 0)
        return CHILD_SIGNAL_KEPT;
    /* A thread of the child's own, busy: its stack must come back. */
    pthread_t t;
    __atomic_store_n(&stop, 0, __ATOMIC_SEQ_CST);
    if (pthread_create(&t, NULL, spinner, NULL) != 0)
        return CHILD_DUMP_FAILED;
    while (!__atomic_load_n(&spinning_here, __ATOMIC_SEQ_CST))
        usleep(1000);
    struct thread_dump d;
    if (threads_dump(&d) != 0)
        return CHILD_DUMP_FAILED;
    int ok = 0;
    for (size_t i = 0; i < d.n; i++)
        if (d.threads[i].tid == spinning_here)
            ok = d.threads[i].status == THREAD_STACK_OK &&
                 d.threads[i].depth > 1;
    threads_dump_free(&d);
    if (!ok || borrowed_signals() != 0)
        return CHILD_DUMP_FAILED;
    return CHILD_OK;
}

TEST(child_forked_mid_dump)
{
    assert_true(borrowed_signals() == 0);
    pthread_t spinner, t;
    assert_true(pthread_create(&spinner, NULL, silent_spinner, NULL) == 0);
    while (!__atomic_load_n(&spinning, __ATOMIC_SEQ_CST))
        usleep(1000);
    assert_true(pthread_create(&t, NULL, dumper, NULL) == 0);
    while (!__atomic_load_n(&dumping, __ATOMIC_SEQ_CST))
        usleep(1000);
    /* The fork must land while the dump holds its borrowed signal: wait
     * for the borrowing itself rather than for a fixed time (the dump
     * reads /proc for every thread first, which under ASan on a busy
     * machine took longer than a quarter of THREADS_WAIT_MS). */
    for (int i = 0; i < 50000 && borrowed_signals() != 1; i++)
        usleep(100);
    assert_true(borrowed_signals() == 1);
    pid_t pid = fork();
    if (pid == 0)
        _exit(child());
    assert_true(pid > 0);
    int status = 0;
    expect_int_eq(waitpid(pid, &status, 0), pid);
    expect_true(WIFEXITED(status));
    if (WIFSIGNALED(status))
        fprintf(stderr, "  child killed by signal %d (stuck)\n",
                WTERMSIG(status));
    expect_int_eq(WIFEXITED(status) ? WEXITSTATUS(status) : -1, CHILD_OK);
    pthread_join(t, NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(spinner, NULL);
    expect_int_eq(borrowed_signals(), 0);
}

int main(void)
{
    real_dl_iterate_phdr = dl_iterate_phdr; /* phdr_hooks.c's job */
    stack_init();
    return run_tests(child_forked_mid_dump, NULL);
}
