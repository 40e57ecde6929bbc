/*
 * The CPU sampler's record of the agent's own threads (cpu_agent_thread):
 * recording a thread twice takes one place, and a thread that ends gives
 * its place back. An attached agent's server threads are recorded by the
 * server's thread start, and a new server runs at every attach: 300 of
 * them one after another (a table of 64 places) are each known as the
 * agent's while they run and not after, and the main thread, recorded
 * last, still is.
 */
#include "agent/cpu/cpu.h"
#include "harness.h"

#include <pthread.h>
#include <unistd.h>

#define THREADS 300

static void *server_thread(void *arg)
{
    int *ok = arg;
    int tid = (int)gettid();
    cpu_agent_thread();
    cpu_agent_thread(); /* the agent's thread start, then the server's */
    int known = cpu_is_agent_tid(tid);
    cpu_agent_thread_end();
    *ok = known && !cpu_is_agent_tid(tid);
    return NULL;
}

TEST(ended_threads_give_their_place_back)
{
    int failed = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_t t;
        int ok = 0;
        assert_true(pthread_create(&t, NULL, server_thread, &ok) == 0);
        pthread_join(t, NULL);
        failed += !ok;
    }
    expect_int_eq(failed, 0);
    cpu_agent_thread();
    expect_true(cpu_is_agent_tid((int)gettid()));
    cpu_agent_thread_end();
    expect_true(!cpu_is_agent_tid((int)gettid()));
}

int main(void)
{
    return run_tests(ended_threads_give_their_place_back, NULL);
}
