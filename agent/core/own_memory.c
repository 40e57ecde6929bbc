/*
 * The registry of memory the agent maps for itself: its arena chunks, the
 * heap profiler's pointer table, its threads' stacks. The kernel here may
 * not name anonymous mappings, and the agent's pages share mappings with
 * the host's when the kernel merges neighbouring ones, so the agent's
 * share of RSS is found by asking mincore() about each registered range.
 *
 * Entered from the agent's mapping sites (interposed calls' slow paths on
 * any host thread, the agent's threads) and read by /debug/memory on HTTP
 * workers. Never allocates; never entered from a signal handler.
 */
#include "agent/core/own_memory.h"
#include "agent/spinlock.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#define OWN_RANGES_MAX 512

struct range {
    uintptr_t start;
    size_t len;
    int stack;
};

static spinlock_t own_lock;
static struct range ranges[OWN_RANGES_MAX];
static size_t nranges;
static long dropped;

static void add(const void *p, size_t len, int stack)
{
    if (!p || !len)
        return;
    spin_lock(&own_lock);
    if (nranges < OWN_RANGES_MAX)
        ranges[nranges++] = (struct range){(uintptr_t)p, len, stack};
    else
        dropped++;
    spin_unlock(&own_lock);
}

void own_memory_add(const void *p, size_t len)
{
    add(p, len, 0);
}

void own_memory_add_stack(const void *p, size_t len)
{
    add(p, len, 1);
}

void own_memory_remove(const void *p, size_t len)
{
    spin_lock(&own_lock);
    for (size_t i = 0; i < nranges; i++) {
        if (ranges[i].start == (uintptr_t)p && ranges[i].len == len) {
            ranges[i] = ranges[--nranges];
            break;
        }
    }
    spin_unlock(&own_lock);
}

/* Resident bytes of [start, start + len), a page-aligned range. */
static size_t resident(uintptr_t start, size_t len, size_t page)
{
    unsigned char vec[256];
    size_t total = 0;
    while (len) {
        size_t chunk = len < sizeof vec * page ? len : sizeof vec * page;
        if (mincore((void *)start, chunk, vec) != 0)
            return total;
        size_t pages = (chunk + page - 1) / page;
        for (size_t i = 0; i < pages; i++)
            total += (vec[i] & 1) ? page : 0;
        start += chunk;
        len -= chunk;
    }
    return total;
}

void own_memory_usage(struct own_memory_usage *out)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct range copy[OWN_RANGES_MAX];
    spin_lock(&own_lock);
    size_t n = nranges;
    for (size_t i = 0; i < n; i++)
        copy[i] = ranges[i];
    out->dropped = dropped;
    spin_unlock(&own_lock);
    out->resident = out->mapped = out->stack_resident = 0;
    out->ranges = n;
    for (size_t i = 0; i < n; i++) {
        /* Stacks are registered as the thread reports them: align. */
        uintptr_t s = copy[i].start & ~(uintptr_t)(page - 1);
        uintptr_t e = (copy[i].start + copy[i].len + page - 1) &
                      ~(uintptr_t)(page - 1);
        out->mapped += e - s;
        size_t res = resident(s, e - s, page);
        out->resident += res;
        if (copy[i].stack)
            out->stack_resident += res;
    }
}
