/* The small internal allocator (core/arena.c). */

#ifndef PPROF_AGENT_ARENA_H
#define PPROF_AGENT_ARENA_H

#include <stddef.h>

/* Returns zeroed memory from mmap that is never freed; NULL on failure.
 * Thread-safe. Not async-signal-safe. Does not allocate through malloc. */
void *arena_alloc(size_t size);

#endif
