/*
 * The agent's constructor: reads the configuration, prepares the tables and
 * has the HTTP server started a moment later (start.c). Runs once, on the
 * host's main thread, before main() (or inside dlopen). It must never exit, abort or change what the host
 * sees: every failure is one line on stderr and the host goes on. Under
 * another C library's loader (musl's) it only stands aside.
 */
#include "agent/stacks/cfi.h"
#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/cpu/cpu.h"
#include "agent/locks/contention.h"
#include "agent/fork.h"
#include "agent/guard.h"
#include "agent/heap/heap.h"
#include "agent/log.h"
#include "agent/stacks/stack.h"
#include "agent/stacks/stack_table.h"
#include "agent/threads/thread_hooks.h"
#include "agent/trace/trace.h"
#include "agent/core/push.h"
#include "process/process.h"
#include "process/push.h"
#include "agent/symbols/symbols.h"
#include "agent/core/next_symbol.h"
#include "agent/core/real.h"
#include "agent/host/proc.h"
#include "http/server.h"

#include <stdlib.h>
#include <string.h>

/* 1 when the line saying that the agent stands aside is due: the
 * environment asked for something the agent would do under glibc (a
 * server, PPROF_ADDR other than off; dumps, PPROF_DUMP_DIR) in a process
 * started by hand, not exec'd by one under the agent (quiet there, as on
 * glibc). PPROF_LOG=quiet silences it; info or debug asks for it in any
 * case. A system-wide LD_PRELOAD alone prints nothing in musl programs. */
STARTUP static int stand_aside_said(void)
{
    const char *level = getenv("PPROF_LOG");
    if (level && strcmp(level, "quiet") == 0)
        return 0;
    if (level && (strcmp(level, "info") == 0 || strcmp(level, "debug") == 0))
        return 1;
    const char *addr = getenv("PPROF_ADDR");
    const char *dump = getenv("PPROF_DUMP_DIR");
    int asked = (addr && addr[0] && strcmp(addr, "off") != 0) ||
                (dump && dump[0]);
    return asked && !rundir_env_from_ancestor();
}

/*
 * Under another C library's loader (musl's): the agent is loaded (every
 * name only glibc has is a weak reference there, resolved to 0), but
 * what it records, and how, rests on glibc's loader and threads. So it
 * reads no setting but the three that decide its one line, starts
 * nothing and registers nothing; every interposer forwards to the next
 * definition, as with PPROF_ENABLE=0, and the program runs as without
 * the agent.
 */
STARTUP static void stand_aside(void)
{
    opt_enable = 0;
    if (stand_aside_said())
        log_info("not a glibc process (musl?): the agent stands aside; "
                 "profiling is off in this process");
}

STARTUP void init_tables(int defer_tables)
{
    real_init();
    agent_start_ns = agent_now_ns();
    symbols_short_init();
    thread_hooks_init();
    stack_init();
    /* The unwind tables wait for the deferred start (start.c), so that a
     * process that execs or exits within the delay never builds them. */
    if (defer_tables)
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
    trace_init();
    agent_ready = 1;
}

__attribute__((constructor)) static void agent_init(void)
{
    guard_enter();
    /* Loaded into a process that was already running (pprof-attach): the
     * settings come with the attach call, not from the host's environment
     * (attach.c). Only a flag here. */
    if (attach_loaded_late()) {
        program_copy();
        guard_leave();
        return;
    }
    if (!loader_is_glibc()) {
        stand_aside();
    } else {
        /* Known before the configuration is read: it sets the default log
         * level (PPROF_FAMILY names another process, agent/host/rundir.c). */
        config_exec_child = rundir_env_from_ancestor();
        config_load();
    }
    /* An exec'd descendant (children.c) that nobody asked to serve or to
     * dump is a pass-through, as with the agent off: what it would record
     * nobody could read, and its stack walks would build unwind tables
     * (Firefox's content processes: 53 MB and a second of CPU each, and
     * an mremap their sandbox traps). */
    int candidate = 0;
    if (config_exec_child && opt_exec_children != CHILDREN_SERVE &&
        !opt_dump_dir[0] && opt_enable) {
        /* Unless it may be the one a forking wrapper hands the serving
         * role down to (role.c). */
        candidate = opt_serve && opt_start_delay_ms > 0 && role_candidate();
        if (!candidate)
            opt_enable = 0;
    }
    if (!opt_enable) {
        heap_init();
        futex_hooks_init(); /* forward syscall() through the loader */
        guard_leave();
        return;
    }
    program_copy();
    init_tables(opt_start_delay_ms > 0);
    /* A candidate samples no allocation unless the role comes. */
    if (candidate && heap_enabled > 0)
        __atomic_store_n(&heap_enabled, 0, __ATOMIC_RELEASE);
    exit_hooks_init();
    children_init();
    fork_init(children_fork_prepare, children_fork_child,
              children_after_fork);
    /* The whole-run CPU profile of PPROF_DUMP_DIR starts at once; the
     * server waits until the process has lived a moment (start.c). An
     * exec'd descendant stays passive unless asked (children.c). */
    dump_start();
    int passive = children_passive();
    /* This image may follow another of the same process under the agent
     * (a wrapper that exec'd the real program: a pyenv shim's bash). The
     * delay counts from the process's start, not from this image's: a
     * wrapper that lived it already showed the process lives on. And the
     * port file such a wrapper wrote names a server that ended with its
     * exec (on a loaded machine pyenv's bash lived more than a second). */
    int64_t lived_ns = 0;
    if (!passive && !rundir_env_own(&lived_ns))
        lived_ns = 0;
    if (lived_ns > 0)
        server_port_file_after_exec(lived_ns);
    int serve = opt_serve && !passive;
    int push = opt_push.on && !passive;
    if (opt_start_delay_ms == 0 && !passive) {
        watch_start();
        if (push)
            push_start();
    }
    /* A process started by hand that may offer the role names itself to
     * its first child (role.c). */
    if (serve && opt_start_delay_ms > 0 && !config_exec_child)
        role_hand_down();
    if (candidate)
        role_arm();
    else if (serve && opt_start_delay_ms == 0)
        start_now();
    else if ((serve || push || (opt_dump_dir[0] && !passive)) &&
             opt_start_delay_ms > 0 &&
             start_later(0, agent_mono_ns() - lived_ns) != 0)
        log_info("cannot start the agent's thread; profiling endpoints are "
                 "off");
    guard_leave();
}

/* The loader's DT_FINI (-Wl,-fini in the Makefile), called at every
 * process's exit: crti's _fini does nothing either, but it lies alone on
 * the last page of the agent's code, a fault at the exit of each process
 * the agent is preloaded into. This one lies with the loading code. */
STARTUP void agent_dt_fini(void)
{
}

__attribute__((destructor)) static void agent_fini(void)
{
    /* The server's threads are left to die with the process: stopping them
     * here could wait on a profile request in flight and delay the host's
     * exit. */
}
