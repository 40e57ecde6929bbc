/*
 * The stack walker across fork (agent/fork.c): a child forked while
 * another thread of the parent was walking (registered as a reader of the
 * unwind tables) or reading the program-header snapshot can still refresh
 * both (it would otherwise wait for ever for a thread it does not have),
 * and parent and child walk afterwards. A thread stopped in the middle of
 * a walk does not keep fork, or the parent's captures, waiting.
 */
#include "agent/stacks/cfi.h"
#include "agent/cpu/cpu.h"
#include "agent/fork.h"
#include "agent/stacks/phdr_cache.h"
#include "agent/stacks/stack.h"
#include "harness.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

/* Flags between threads: atomic, so that ThreadSanitizer sees the order. */
static int reading, stop_reading;

/* Stands for a walk on another thread, stopped half-way: registered as a
 * reader of the tables and of the snapshot. */
static void *reader(void *arg)
{
    (void)arg;
    unsigned e = __atomic_load_n(&cfi_epoch, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&cfi_readers[e & 1], 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&reading, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&stop_reading, __ATOMIC_SEQ_CST))
        usleep(1000);
    __atomic_fetch_sub(&cpu_phdr_readers, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&cfi_readers[e & 1], 1, __ATOMIC_SEQ_CST);
    return NULL;
}

TEST(child_forgets_the_parents_walks)
{
    pthread_t t;
    assert_true(pthread_create(&t, NULL, reader, NULL) == 0);
    while (!__atomic_load_n(&reading, __ATOMIC_SEQ_CST))
        usleep(1000);
    /* The parent captures as usual meanwhile. */
    uintptr_t pcs[16];
    expect_true(stack_capture(pcs, 16) > 0);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(5); /* waiting for a reader that is not here: killed */
        /* A new object: the refresh must rebuild, and wait for walks. */
        void *h = dlopen("libresolv.so.2", RTLD_NOW);
        int rebuilt = cfi_tables_refresh() > 0;
        phdr_unload_enter(); /* what dlclose does */
        phdr_unload_leave();
        if (h)
            dlclose(h);
        _exit(h && rebuilt && stack_capture(pcs, 16) > 0 &&
                      cpu_phdr_readers == 0 && cpu_phdr_busy == 0
                  ? 0
                  : 1);
    }
    assert_true(pid > 0);
    int status = 0;
    expect_int_eq(waitpid(pid, &status, 0), pid);
    expect_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    __atomic_store_n(&stop_reading, 1, __ATOMIC_SEQ_CST);
    pthread_join(t, NULL);
    expect_true(stack_capture(pcs, 16) > 0);
}

int main(void)
{
    fork_init(NULL, NULL, NULL); /* the agent's fork list, without the shell */
    stack_init();
    cfi_tables_refresh(); /* the agent's init.c builds them */
    return run_tests(child_forgets_the_parents_walks, NULL);
}
