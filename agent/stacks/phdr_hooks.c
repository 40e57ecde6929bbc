/*
 * Interposers that keep the CPU signal handler's unwinding safe:
 *
 * - dl_iterate_phdr: libunwind (and libgcc) call it to find unwind tables.
 *   Outside our signal handler it forwards to the C library; on a thread
 *   inside the handler (cpu_in_handler) it walks the cached snapshot of
 *   phdr_cache.c instead, because the real one takes the loader lock.
 *   While a thread is inside the real one (holding that lock, running its
 *   caller's callback), agent_tls.in_loader keeps the signal handlers from
 *   unwinding it: libunwind's own cache lock could be held by a thread that
 *   waits for the loader lock, and the handler would wait for that thread.
 * - dlclose: a library must not be unmapped while a handler unwinds
 *   through it. The hook keeps handlers out (they drop and count the
 *   sample) for the duration of the real dlclose, then refreshes the cache
 *   and libunwind's caches, and tells the symbolizer. Before that it stops
 *   fast walks from inside locks until each thread is readied again
 *   (stack_loader_changing in stack.c).
 *
 * dlopen is deliberately not interposed: glibc uses the caller's address
 * to pick the namespace and the RUNPATH search list, which an interposer
 * would change. New objects reach the snapshot on the profile's next drain.
 *
 * Entered on any host thread (and from the handler, for dl_iterate_phdr).
 */
#include "agent/cpu/cpu.h"

#include "agent/stacks/cfi.h"
#include "agent/compiler.h"
#include "agent/guard.h"
#include "agent/core/loader.h"
#include "agent/core/next_symbol.h"
#include "agent/stacks/objects.h"
#include "agent/stacks/phdr_cache.h"

#include <dlfcn.h>
#include <link.h>

static int (*real_dlclose)(void *);

STARTUP static void resolve(void)
{
    if (!real_dl_iterate_phdr)
        real_dl_iterate_phdr = next_symbol("dl_iterate_phdr");
    if (!real_dlclose)
        real_dlclose = next_symbol("dlclose");
    if (!agent_find_object)
        agent_find_object = (int (*)(void *, struct dl_find_object *))
            next_symbol("_dl_find_object");
}

__attribute__((constructor(101))) static void phdr_hooks_init(void)
{
    resolve();
}

__attribute__((visibility("default"))) int
dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data)
{
    if (cpu_in_handler)
        return phdr_cache_iterate(cb, data);
    if (unlikely(!real_dl_iterate_phdr)) {
        resolve();
        if (!real_dl_iterate_phdr)
            return 0;
    }
    /* The agent's own calls (libunwind's, on its threads) take the fork
     * gate (loader.c); the host's go straight through, as without it. */
    if (guard_active())
        return loader_iterate_phdr(cb, data);
    agent_tls.in_loader++;
    int ret = real_dl_iterate_phdr(cb, data);
    agent_tls.in_loader--;
    return ret;
}

__attribute__((visibility("default"))) int dlclose(void *handle)
{
    if (unlikely(!real_dlclose)) {
        resolve();
        if (!real_dlclose)
            return -1;
    }
    phdr_unload_enter();
    int ret = real_dlclose(handle);
    phdr_unload_leave();
    if (agent_ready) {
        objects_changed();
        /* The unloaded object's tables go (a walk meanwhile may still use
         * them: it reads only the agent's tables and the stack, never the
         * object). */
        cfi_tables_refresh();
    }
    return ret;
}
