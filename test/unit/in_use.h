/* Bytes in use from the allocator, for tests that check what a call
 * allocated: glibc's count, or the sanitizer runtime's when it owns malloc
 * (the sanitizer builds of the tests). */
#ifndef TEST_IN_USE_H
#define TEST_IN_USE_H

#include <malloc.h>
#include <stddef.h>

extern size_t __sanitizer_get_current_allocated_bytes(void)
    __attribute__((weak));

static inline size_t in_use(void)
{
    if (__sanitizer_get_current_allocated_bytes)
        return __sanitizer_get_current_allocated_bytes();
    return mallinfo2().uordblks;
}

#endif
