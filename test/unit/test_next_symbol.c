/*
 * agent/core/next_symbol.c against dlsym(RTLD_NEXT): the same address for
 * every name the agent resolves, for names with several versions (the
 * default one), and no answer of its own where it must leave the question
 * to dlsym (IFUNC, thread-local, absent). The test program plays the
 * agent's part: the C library comes after it in the loader's list.
 */
#include "harness.h"

#include "agent/core/next_symbol.h"

#include <dlfcn.h>

static const char *const names[] = {
    "malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc",
    "memalign", "valloc", "pvalloc", "malloc_usable_size", "read", "write",
    "close", "close_range", "closefrom", "dup2", "dup3", "pipe2", "socket",
    "accept", "accept4", "recv", "send", "shutdown", "sigprocmask",
    "pthread_sigmask", "pthread_create", "pthread_mutex_lock",
    "pthread_setname_np", "dl_iterate_phdr", "dlclose", "_dl_find_object",
    "syscall", "_exit",
    "fork", "daemon", "prctl", "setuid", "epoll_wait", "poll", "nanosleep",
    /* several versions: dlsym gives the default */
    "pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_signal",
    "timer_create", "sched_setaffinity", "realpath", "posix_spawn",
};

TEST(same_answers_as_dlsym)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *want = dlsym(RTLD_NEXT, names[i]);
        expect_true(want != NULL);
        expect_true(next_symbol_fast(names[i]) == want);
        expect_true(next_symbol(names[i]) == want);
    }
}

TEST(leaves_to_dlsym_what_it_cannot_answer)
{
    /* memcpy and strlen are the C library's IFUNCs (the loader runs their
     * resolver), except where a sanitizer's runtime, loaded before it,
     * defines them as plain functions */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    expect_true(next_symbol_fast("memcpy") == dlsym(RTLD_NEXT, "memcpy"));
#else
    expect_true(next_symbol_fast("memcpy") == NULL);
    expect_true(next_symbol_fast("strlen") == NULL);
#endif
    expect_true(next_symbol("memcpy") == dlsym(RTLD_NEXT, "memcpy"));
    expect_true(next_symbol_fast("no_such_name_in_any_object") == NULL);
    expect_true(next_symbol("no_such_name_in_any_object") == NULL);
    /* a thread-local definition */
    expect_true(next_symbol_fast("errno") == NULL);
}

int main(void)
{
    return run_tests(same_answers_as_dlsym,
                     leaves_to_dlsym_what_it_cannot_answer, NULL);
}
