/* The program-header cache (stacks/phdr_cache.c). */

#ifndef PPROF_AGENT_PHDR_CACHE_H
#define PPROF_AGENT_PHDR_CACHE_H

#include <link.h>
#include <stddef.h>

/* Active handlers and writers of the cache (Dekker, seq_cst): a handler
 * registers in cpu_phdr_readers and does not unwind when cpu_phdr_busy is
 * non-zero; a writer raises cpu_phdr_busy and waits for no readers. */
extern int cpu_phdr_readers;
extern int cpu_phdr_busy;

/* Re-reads the loaded objects into the cache when dl_iterate_phdr's
 * add/remove counters changed (force: always). Waits for handlers to leave.
 * Returns 1 when it rebuilt, 0 when nothing changed, -errno on failure.
 * Not async-signal-safe (calls the real dl_iterate_phdr). */
int phdr_cache_refresh(int force);

/* dl_iterate_phdr over the cached snapshot, leaving out objects the C
 * library has unloaded since (where it can tell, glibc 2.35 on).
 * Async-signal-safe when called with cpu_phdr_readers held and
 * cpu_phdr_busy clear. Does not allocate. */
int phdr_cache_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *),
                       void *data);

/* Unloading protocol for dlclose: enter raises busy and waits for the
 * handlers to leave; leave rebuilds the cache and lowers busy.
 * Not async-signal-safe. */
void phdr_unload_enter(void);
void phdr_unload_leave(void);

/* In a forked child: forgets the readers and writers of the parent's
 * other threads and makes the next refresh rebuild. Not async-signal-safe. */
void phdr_cache_fork_child(void);

#endif
