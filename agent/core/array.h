/* Growing arrays (core/array.c). */

#ifndef PPROF_AGENT_ARRAY_H
#define PPROF_AGENT_ARRAY_H

#include <stddef.h>

/* Makes room for `want` elements of `size` bytes in *v, whose room is *cap
 * elements: at least doubles, starting at `first`. 0, or -ENOMEM with *v
 * and *cap unchanged. Not async-signal-safe (realloc). */
int array_reserve(void **v, size_t *cap, size_t want, size_t size,
                  size_t first);
#define ARRAY_RESERVE(v, cap, want, first)                                     \
    array_reserve((void **)&(v), &(cap), (want), sizeof *(v), (first))

#endif
