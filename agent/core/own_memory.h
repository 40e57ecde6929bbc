/* The agent's own memory (core/own_memory.c). */

#ifndef PPROF_AGENT_OWN_MEMORY_H
#define PPROF_AGENT_OWN_MEMORY_H

#include <stddef.h>

/* Registers [p, p + len), mapped by the agent for itself (tables, arena
 * chunks, its threads' stacks), so /debug/memory can count its resident
 * pages (mincore) apart from the host's; remove before unmapping. A full
 * registry drops the range (counted as unregistered).
 * Not async-signal-safe. Does not allocate. */
void own_memory_add(const void *p, size_t len);
/* The same for one of the agent's threads' stacks. */
void own_memory_add_stack(const void *p, size_t len);
void own_memory_remove(const void *p, size_t len);

/* Resident and mapped bytes of the registered ranges, and the number of
 * ranges that did not fit in the registry. Not async-signal-safe. */
struct own_memory_usage {
    size_t resident;
    size_t mapped;
    size_t stack_resident; /* of which the agent's threads' stacks */
    size_t ranges;
    long dropped;
};
void own_memory_usage(struct own_memory_usage *out);

#endif
