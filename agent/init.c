/*
 * The agent's constructor: reads the configuration, prepares the tables and
 * starts the HTTP server. Runs once, on the host's main thread, before main()
 * (or inside dlopen). It must never exit, abort or change what the host
 * sees: every failure is one line on stderr and the host goes on.
 */
#include "agent/agent.h"
#include "agent/cpu.h"
#include "agent/contention.h"
#include "agent/heap.h"
#include "agent/ops.h"
#include "http/http.h"

int64_t agent_start_ns;

__attribute__((constructor)) static void agent_init(void)
{
    guard_enter();
    config_load();
    if (!opt_enable) {
        heap_init();
        guard_leave();
        return;
    }
    agent_start_ns = agent_now_ns();
    thread_hooks_init();
    stack_init();
    cpu_timer_init();
    threadcreate_table = stack_table_create(1, 4096);
    heap_init();
    contention_init();
    agent_ready = 1;
    children_init();
    stack_fork_init();
    if (opt_serve)
        server_start();
    dump_start();
    guard_leave();
}

__attribute__((destructor)) static void agent_fini(void)
{
    /* The server's threads are left to die with the process: stopping them
     * here could wait on a profile request in flight and delay the host's
     * exit. */
}
