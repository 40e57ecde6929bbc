/*
 * Which loaded objects a round of attach_relocs.c may rewrite: those
 * loaded when the round began, and only once each one's load has ended.
 * An object whose dlopen is under way may be half relocated, its RELRO
 * not yet protected: a store there, or a page given back a read-only
 * protection, would fail the loader's own next write. dlopen holds the
 * loader's lock for the whole of a load; dladdr takes it too, so once
 * the objects are noted and dladdr returned, every load that was under
 * way has ended. An object unloaded during the round (the loader's count
 * of removals moved) may have left its base to another one: the round
 * is cut, writes nothing, and is made again.
 *
 * Entered on the starter (the bind), the rescanner and the detacher, one
 * at a time (attach_relocs.c); never in signal context.
 */
#include "process/process.h"

#include "agent/core/loader.h"
#include "agent/stacks/cfi.h"

#include <dlfcn.h>
#include <link.h>

#define ROUND_OBJECTS 1024 /* objects beyond are never rewritten */

/* The round under way: written by attach_round_begin, read by the walks
 * of the same thread. */
static struct {
    uintptr_t base[ROUND_OBJECTS];
    int n, seen;
    unsigned long long adds, subs; /* the loader's counters then */
    int cut;
} round_now;

/* attach_round_begin's walk: each object's base, and the counters. */
static int note_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)arg;
    if (round_now.seen++ == 0) {
        unsigned long long v[2] = {0, 0};
        cfi_phdr_counters(info, size, v);
        round_now.adds = v[0];
        round_now.subs = v[1];
    }
    if (round_now.n < ROUND_OBJECTS)
        round_now.base[round_now.n++] = info->dlpi_addr;
    return 0;
}

unsigned long long attach_round_begin(void)
{
    Dl_info info;
    round_now.n = round_now.seen = round_now.cut = 0;
    loader_iterate_phdr(note_object, NULL);
    loader_addr((const void *)attach_round_begin, &info);
    return round_now.adds;
}

int attach_round_cut(const struct dl_phdr_info *info, size_t size)
{
    if (info) {
        unsigned long long v[2] = {0, 0};
        cfi_phdr_counters((struct dl_phdr_info *)info, size, v);
        if (v[1] != round_now.subs)
            round_now.cut = 1;
    }
    return round_now.cut;
}

int attach_round_holds(uintptr_t base)
{
    for (int i = 0; i < round_now.n; i++)
        if (round_now.base[i] == base)
            return 1;
    return 0;
}

int attach_round_gone(uintptr_t base)
{
    return round_now.seen <= ROUND_OBJECTS && !attach_round_holds(base);
}
