/*
 * User annotations for the execution trace (test/integration/trace_tasks.sh):
 * two "worker" threads serve "request" tasks in a loop, each with a
 * "parse" region holding a nested "lookup" region and a log message
 * ("user" = "alice"); one task, "handoff", is begun by the main thread
 * and ended by a worker. Every 100 ms the main thread also starts a
 * thread that names itself "shortlived" and ends, and prints "enabled N":
 * 1 while a trace records. Runs until killed.
 */
#include "agent/pprofagent.h"
#include "test/programs/timing.h"

#include <pthread.h>
#include <stdio.h>

static pprof_task handoff;

static void lookup(pprof_task t)
{
    pprof_trace_region_begin(t, "lookup");
    sleep_us(1000);
    pprof_trace_region_end(t, "lookup");
}

static void serve_request(void)
{
    pprof_task t = pprof_trace_task_begin(0, "request");
    pprof_trace_region_begin(t, "parse");
    lookup(t);
    pprof_trace_region_end(t, "parse");
    pprof_trace_log(t, "user", "alice");
    pprof_trace_task_end(t);
}

static void *worker(void *arg)
{
    pthread_setname_np(pthread_self(), "worker");
    for (long i = 0;; i++) {
        serve_request();
        pprof_task h = __atomic_exchange_n(&handoff, 0, __ATOMIC_ACQ_REL);
        if (h)
            pprof_trace_task_end(h);
        sleep_us(3000 + 1000 * (long)(arg != NULL));
    }
    return NULL;
}

static void *short_lived(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "shortlived");
    sleep_us(1000);
    return NULL;
}

static void start_short_lived(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, short_lived, NULL) == 0)
        pthread_join(t, NULL);
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_create(&t, NULL, worker, &t);
    for (;;) {
        pprof_task h = pprof_trace_task_begin(0, "handoff");
        pprof_trace_log(h, "from", "main");
        __atomic_store_n(&handoff, h, __ATOMIC_RELEASE);
        start_short_lived();
        printf("enabled %d\n", pprof_trace_enabled());
        fflush(stdout);
        sleep_us(100000);
    }
}
