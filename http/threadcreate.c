/*
 * /debug/pprof/threadcreate: the stacks that created the host's threads
 * (recorded by agent/thread_hooks.c), one sample per distinct stack.
 */
#include "http/http.h"

#include "agent/agent.h"

void handle_threadcreate(struct request *r)
{
    serve_count_table(r, "threadcreate", threadcreate_table);
}
