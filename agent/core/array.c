/*
 * Growing arrays: the one doubling rule of the code that may allocate
 * (readers of /proc and ELF files, the symbolizer, the snapshot copies,
 * the profile builder, the flame graph). Not async-signal-safe: realloc.
 */
#include "agent/core/array.h"
#include "agent/core/real.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int array_reserve(void **v, size_t *cap, size_t want, size_t size,
                  size_t first)
{
    if (want <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : first;
    if (ncap < want)
        ncap = want;
    if (ncap > SIZE_MAX / size)
        return -ENOMEM;
    void *nv = real_realloc(*v, ncap * size);
    if (!nv)
        return -ENOMEM;
    *v = nv;
    *cap = ncap;
    return 0;
}
