/*
 * pthread_create interposer: records the creating stack for the
 * threadcreate profile and marks threads created by the agent itself (the
 * HTTP server's) so that they are never sampled or listed as the host's.
 *
 * Runs on the host's threads inside pthread_create; allocates one small
 * start record through the host's allocator with the guard entered, and
 * forwards everything else to the real pthread_create unchanged.
 */
#include "agent/agent.h"
#include "agent/symbols.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

int (*real_pthread_create)(pthread_t *, const pthread_attr_t *,
                           void *(*)(void *), void *);

struct stack_table *threadcreate_table;
long threads_created;

struct start_record {
    void *(*fn)(void *);
    void *arg;
    int agent_thread;
};

void thread_hooks_init(void)
{
    if (!real_pthread_create)
        real_pthread_create = dlsym(RTLD_NEXT, "pthread_create");
}

static void *thread_start(void *p)
{
    struct start_record r = *(struct start_record *)p;
    guard_enter();
    free(p);
    guard_leave();
    if (r.agent_thread)
        agent_tls.agent_thread = 1;
    return r.fn(r.arg);
}

static void record_creation(void)
{
    uintptr_t pcs[STACK_MAX];
    int n = stack_capture(pcs, STACK_MAX);
    if (n == 0) {
        pcs[0] = FRAME_UNKNOWN;
        n = 1;
    }
    struct stack_entry *e = stack_table_get(threadcreate_table, pcs, n, 0);
    if (e)
        stack_entry_add(e, 0, 1);
    __atomic_fetch_add(&threads_created, 1, __ATOMIC_RELAXED);
}

__attribute__((visibility("default"))) int
pthread_create(pthread_t *thread, const pthread_attr_t *attr,
               void *(*fn)(void *), void *arg)
{
    if (unlikely(!real_pthread_create)) {
        thread_hooks_init();
        if (!real_pthread_create)
            return EAGAIN;
    }
    if (!agent_ready)
        return real_pthread_create(thread, attr, fn, arg);

    int agent = guard_active();
    guard_enter();
    if (!agent)
        record_creation();
    struct start_record *r = malloc(sizeof *r);
    guard_leave();
    if (!r)
        return real_pthread_create(thread, attr, fn, arg);
    r->fn = fn;
    r->arg = arg;
    r->agent_thread = agent;
    int err = real_pthread_create(thread, attr, thread_start, r);
    if (err) {
        guard_enter();
        free(r);
        guard_leave();
    }
    return err;
}
