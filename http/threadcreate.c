/*
 * /debug/pprof/threadcreate: the stacks that created the host's threads
 * (recorded by agent/threads/thread_hooks.c), one sample per distinct stack.
 */
#include "http/http.h"

#include "agent/threads/thread_hooks.h"

void handle_threadcreate(struct request *r)
{
    serve_count_table(r, "threadcreate", threadcreate_table);
}

long threadcreate_count(const char *name)
{
    (void)name;
    return __atomic_load_n(&threads_created, __ATOMIC_RELAXED);
}
