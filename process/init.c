/*
 * The agent's constructor: reads the configuration, prepares the tables and
 * has the HTTP server started a moment later (start.c). Runs once, on the
 * host's main thread, before main() (or inside dlopen). It must never exit, abort or change what the host
 * sees: every failure is one line on stderr and the host goes on.
 */
#include "agent/agent.h"
#include "agent/cfi.h"
#include "agent/cpu.h"
#include "agent/contention.h"
#include "agent/heap.h"
#include "agent/push.h"
#include "process/process.h"
#include "process/push.h"
#include "agent/symbols.h"
#include "http/server.h"

__attribute__((constructor)) static void agent_init(void)
{
    guard_enter();
    config_load();
    if (!opt_enable) {
        heap_init();
        futex_hooks_init(); /* forward syscall() through the loader */
        guard_leave();
        return;
    }
    agent_start_ns = agent_now_ns();
    symbols_short_init();
    thread_hooks_init();
    stack_init();
    /* The unwind tables wait for the deferred start (start.c), so that a
     * process that execs or exits within the delay never builds them. */
    if (opt_start_delay_ms > 0)
        cfi_tables_defer();
    else
        cfi_tables_refresh();
    cpu_timer_init();
    threadcreate_table = stack_table_create(1, 4096);
    heap_init();
    /* Each interposer-plus-recorder pair alike: the interposers resolve
     * the C library's functions, then the recorder turns on. */
    lock_hooks_init();
    wait_hooks_init();
    futex_hooks_init();
    contention_init();
    agent_ready = 1;
    exit_hooks_init();
    children_init();
    fork_init(children_fork_prepare, children_fork_child);
    /* The whole-run CPU profile of PPROF_DUMP_DIR starts at once; the
     * server waits until the process has lived a moment (start.c). */
    dump_start();
    if (opt_start_delay_ms == 0) {
        if (opt_serve)
            start_now();
        push_start();
    } else if ((opt_serve || opt_push.on) && start_later(0) != 0)
        log_info("cannot start the agent's thread; profiling endpoints are "
                 "off");
    guard_leave();
}

__attribute__((destructor)) static void agent_fini(void)
{
    /* The server's threads are left to die with the process: stopping them
     * here could wait on a profile request in flight and delay the host's
     * exit. */
}
