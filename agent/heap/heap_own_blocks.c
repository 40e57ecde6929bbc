/*
 * Large blocks the agent's own threads allocate, served straight from
 * mmap instead of the host's allocator: the symbolizer's decompressed
 * debug sections (about 10 MB for libc's debug file, in blocks of up to
 * 6 MB) and any other allocation of OWN_BLOCK_MIN bytes or more made on an
 * agent thread. Given back with munmap when freed, they leave nothing
 * behind in the host's heap: through glibc, each free of such a block
 * raised the process's dynamic mmap threshold (and its trim threshold
 * twice that), so the next ones came from the heap and stayed resident,
 * and the host's own large allocations changed path because of the agent.
 *
 * Entered from the malloc interposers' slow paths and the agent's own
 * real_malloc family (malloc_hooks.c) on agent threads (the allocation),
 * and on any thread (the free: the filter sends the pointer to
 * free_slow). Never allocates through the host; never entered from a
 * signal handler.
 */
#include "agent/heap/heap.h"
#include "agent/core/own_memory.h"
#include "agent/spinlock.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define OWN_BLOCKS_MAX 64

struct own_block {
    uintptr_t ptr; /* 0: free slot */
    size_t len;    /* mapped bytes */
    size_t size;   /* requested bytes */
};

static spinlock_t blocks_lock;
static struct own_block blocks[OWN_BLOCKS_MAX];
static int blocks_live; /* read without the lock: 0 means none to look up */

void *heap_own_block_alloc(size_t size)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || size > SIZE_MAX / 2)
        return NULL;
    size_t len = (size + (size_t)page - 1) & ~((size_t)page - 1);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    spin_lock(&blocks_lock);
    int slot = -1;
    for (int i = 0; i < OWN_BLOCKS_MAX && slot < 0; i++)
        if (!blocks[i].ptr)
            slot = i;
    if (slot >= 0) {
        blocks[slot] = (struct own_block){(uintptr_t)p, len, size};
        __atomic_fetch_add(&blocks_live, 1, __ATOMIC_RELAXED);
        /* Before the pointer leaves: free must find it. */
        heap_filter_mark(p);
    }
    spin_unlock(&blocks_lock);
    if (slot < 0) {
        /* Full: the caller uses the host's allocator. */
        munmap(p, len);
        return NULL;
    }
    own_memory_add(p, len);
    return p;
}

/* Takes p's slot out; 1 when p was an own block (its sizes in *len and
 * *size). */
static int take(const void *p, size_t *len, size_t *size)
{
    if (!__atomic_load_n(&blocks_live, __ATOMIC_RELAXED))
        return 0;
    int found = 0;
    spin_lock(&blocks_lock);
    for (int i = 0; i < OWN_BLOCKS_MAX; i++) {
        if (blocks[i].ptr != (uintptr_t)p)
            continue;
        *len = blocks[i].len;
        *size = blocks[i].size;
        blocks[i].ptr = 0;
        __atomic_fetch_sub(&blocks_live, 1, __ATOMIC_RELAXED);
        heap_filter_unmark(p);
        found = 1;
        break;
    }
    spin_unlock(&blocks_lock);
    return found;
}

int heap_own_block_free(void *p)
{
    size_t len, size;
    if (!p || !take(p, &len, &size))
        return 0;
    own_memory_remove(p, len);
    munmap(p, len);
    return 1;
}

size_t heap_own_block_size(const void *p)
{
    if (!p || !__atomic_load_n(&blocks_live, __ATOMIC_RELAXED))
        return 0;
    size_t size = 0;
    spin_lock(&blocks_lock);
    for (int i = 0; i < OWN_BLOCKS_MAX; i++)
        if (blocks[i].ptr == (uintptr_t)p)
            size = blocks[i].size;
    spin_unlock(&blocks_lock);
    return size;
}
