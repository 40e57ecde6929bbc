/*
 * A bump allocator over mmap for memory the agent keeps for the life of the
 * process (stack table entries, hash slots). It never calls malloc, so the
 * agent's bookkeeping never appears in, or recurses through, the host's
 * allocator. Entered from interposed calls on any host thread; not from
 * signal handlers (mmap is not on the async-signal-safe list).
 */
#include "agent/core/arena.h"
#include "agent/core/own_memory.h"
#include "agent/spinlock.h"

#include <sys/mman.h>

#define ARENA_CHUNK (1u << 20)

static spinlock_t arena_lock;
static char *arena_cur;
static size_t arena_left;

static void *map_zeroed(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    own_memory_add(p, size);
    return p;
}

void *arena_alloc(size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size >= ARENA_CHUNK / 4)
        return map_zeroed(size);
    spin_lock(&arena_lock);
    if (size > arena_left) {
        char *chunk = map_zeroed(ARENA_CHUNK);
        if (!chunk) {
            spin_unlock(&arena_lock);
            return NULL;
        }
        arena_cur = chunk;
        arena_left = ARENA_CHUNK;
    }
    void *p = arena_cur;
    arena_cur += size;
    arena_left -= size;
    spin_unlock(&arena_lock);
    return p;
}
