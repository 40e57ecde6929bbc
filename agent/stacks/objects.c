/*
 * The loaded-objects generation: one counter that says "the set of loaded
 * objects changed". Bumped by whoever learns it (the dlclose interposer,
 * the program-header snapshot when the loader's add/remove counts moved);
 * read by whoever keeps something per object (the symbolizer), which
 * compares it with the generation it last rebuilt at instead of being
 * called.
 *
 * Contexts: any thread; the bump and the read are single atomic
 * operations, async-signal-safe. object_range_of() is not (the loader's
 * lock): it serves set-up paths.
 */
#include "agent/compiler.h"
#include "agent/stacks/objects.h"
#include "agent/core/loader.h"

#include <dlfcn.h>
#include <link.h>

static unsigned generation;

PPROF_SIGNAL_SAFE void objects_changed(void)
{
    __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST);
}

PPROF_SIGNAL_SAFE unsigned objects_generation(void)
{
    return __atomic_load_n(&generation, __ATOMIC_SEQ_CST);
}

struct range_query {
    uintptr_t base, lo, hi;
};

static int find_base(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct range_query *q = data;
    if (info->dlpi_addr != q->base)
        return 0;
    phdr_load_range(info, &q->lo, &q->hi);
    return 1;
}

int object_range_of(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
    Dl_info info;
    *lo = *hi = 0;
    if (!loader_addr(addr, &info) || !info.dli_fbase)
        return -1;
    struct range_query q = {(uintptr_t)info.dli_fbase, UINTPTR_MAX, 0};
    loader_iterate_phdr(find_base, &q);
    if (q.lo >= q.hi)
        return -1;
    *lo = q.lo;
    *hi = q.hi;
    return 0;
}
