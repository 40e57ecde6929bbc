/*
 * Where the resident memory goes: classifies the mappings of
 * /proc/self/smaps (read by maps.c), asks the allocator for its own view
 * (glibc's mallinfo2, jemalloc's mallctl, gperftools' MallocExtension,
 * whichever is linked in, looked up with dlsym) and the heap profiler for
 * its estimate, and splits RSS into parts that do not overlap and add up
 * to it. agent/heap/memory.h has the contract, docs/memory.md the reasoning.
 *
 * Runs on HTTP workers only; reads /proc and calls the allocator's
 * statistics functions, which may take the allocator's own locks but never
 * the host's.
 */
#include "agent/heap/memory.h"
#include "agent/core/real.h"

#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/heap/fmath.h"
#include "agent/heap/heap.h"
#include "agent/core/own_memory.h"
#include "agent/core/loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* glibc's heaps of the arenas other than the main one are mmapped at an
 * address aligned to their maximum size (HEAP_MAX_SIZE: 64 MiB on 64-bit
 * hosts), and grown by making more of that reservation writable: one
 * read-write mapping at the aligned start, then the PROT_NONE rest. */
#define ARENA_HEAP_MAX ((uintptr_t)64 << 20)

/* glibc's thread stacks: one mapping whose lowest pages are a PROT_NONE
 * guard (a page by default, at most this), then the stack. */
#define STACK_GUARD_MAX ((uintptr_t)1 << 20)

static int is_anon(const struct smaps_entry *e)
{
    return !e->named;
}

static int is_none(const struct smaps_entry *e)
{
    return is_anon(e) && strncmp(e->perms, "---", 3) == 0;
}

static int is_rw(const struct smaps_entry *e)
{
    return is_anon(e) && e->perms[0] == 'r' && e->perms[1] == 'w';
}

/* An arena heap: read-write at a 64 MiB boundary, and with the PROT_NONE
 * rest that follows it (if any), exactly 64 MiB. */
static int is_arena_heap(const struct smaps_entry *v, size_t n, size_t i)
{
    const struct smaps_entry *e = &v[i];
    if (!is_rw(e) || (e->start & (ARENA_HEAP_MAX - 1)) != 0)
        return 0;
    uintptr_t end = e->limit;
    if (i + 1 < n && is_none(&v[i + 1]) && v[i + 1].start == e->limit)
        end = v[i + 1].limit;
    return end - e->start == ARENA_HEAP_MAX;
}

/* A thread stack: read-write, right above a small PROT_NONE guard. */
static int is_thread_stack(const struct smaps_entry *v, size_t i)
{
    const struct smaps_entry *e = &v[i];
    if (!is_rw(e) || i == 0)
        return 0;
    const struct smaps_entry *g = &v[i - 1];
    return is_none(g) && g->limit == e->start &&
           g->limit - g->start <= STACK_GUARD_MAX;
}

static void classify(const struct smaps_entry *v, size_t n,
                     struct memory_report *r)
{
    for (size_t i = 0; i < n; i++) {
        const struct smaps_entry *e = &v[i];
        r->anon_rss += e->anonymous;
        if (e->kind == SMAPS_HEAP) {
            r->brk_heap_rss += e->anonymous;
        } else if (e->kind == SMAPS_STACK) {
            r->stacks_rss += e->anonymous;
            r->stacks++;
        } else if (is_arena_heap(v, n, i)) {
            r->arena_heaps_rss += e->anonymous;
            r->arena_heaps++;
        } else if (is_thread_stack(v, i)) {
            r->stacks_rss += e->anonymous;
            r->stacks++;
        }
    }
}

/* ---- the allocator's view ------------------------------------------------- */

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef int (*tc_property_fn)(const char *, size_t *);
typedef struct mallinfo2 (*mallinfo2_fn)(void);

static int64_t ctl(mallctl_fn mallctl, const char *name)
{
    size_t v = 0, sz = sizeof v;
    return mallctl(name, &v, &sz, NULL, 0) == 0 ? (int64_t)v : -1;
}

static int64_t tc_prop(tc_property_fn get, const char *name)
{
    size_t v = 0;
    return get(name, &v) ? (int64_t)v : -1;
}

static void allocator_read(struct allocator_view *a)
{
    memset(a, 0xff, sizeof *a); /* every figure -1: not given */
    mallctl_fn mallctl = (mallctl_fn)loader_sym(RTLD_DEFAULT, "mallctl");
    if (mallctl) {
        /* Writing the epoch refreshes jemalloc's statistics. */
        uint64_t epoch = 1;
        size_t sz = sizeof epoch;
        mallctl("epoch", &epoch, &sz, &epoch, sz);
        a->name = "jemalloc";
        a->allocated = ctl(mallctl, "stats.allocated");
        a->active = ctl(mallctl, "stats.active");
        a->resident = ctl(mallctl, "stats.resident");
        a->mapped = ctl(mallctl, "stats.mapped");
        a->retained = ctl(mallctl, "stats.retained");
        a->metadata = ctl(mallctl, "stats.metadata");
        return;
    }
    tc_property_fn get = (tc_property_fn)loader_sym(
        RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
    if (get) {
        a->name = "tcmalloc";
        a->allocated = tc_prop(get, "generic.current_allocated_bytes");
        a->heap_size = tc_prop(get, "generic.heap_size");
        a->pageheap_free = tc_prop(get, "tcmalloc.pageheap_free_bytes");
        a->pageheap_unmapped = tc_prop(get, "tcmalloc.pageheap_unmapped_bytes");
        if (a->heap_size >= 0 && a->pageheap_unmapped >= 0)
            a->resident = a->heap_size - a->pageheap_unmapped;
        return;
    }
    a->name = "glibc";
    mallinfo2_fn mi2 = (mallinfo2_fn)loader_sym(RTLD_DEFAULT, "mallinfo2");
    if (!mi2)
        return;
    struct mallinfo2 m = mi2();
    a->arena = (int64_t)m.arena;
    a->ordblks = (int64_t)m.ordblks;
    a->hblks = (int64_t)m.hblks;
    a->hblkhd = (int64_t)m.hblkhd;
    a->uordblks = (int64_t)m.uordblks;
    a->fordblks = (int64_t)m.fordblks;
    a->keepcost = (int64_t)m.keepcost;
}

/* ---- the heap profile's estimate ------------------------------------------ */

/* Each live sample of size s stands for w = s / p bytes; the estimate's
 * variance is estimated by the sum of w * (w - s) = w^2 (1 - p). */
static void sampled_read(struct memory_report *r)
{
    r->heap_rate = opt_heap_rate;
    struct heap_live *live = NULL;
    size_t n = 0;
    if (heap_enabled <= 0 || heap_table_live(&live, &n) != 0) {
        r->sampled_inuse = r->sampled_stddev = -1; /* null: no estimate */
        return;
    }
    struct heap_stats st;
    heap_table_stats(&st);
    r->heap_table_mapped = (int64_t)st.table_bytes;
    double total = 0, var = 0;
    for (size_t i = 0; i < n; i++) {
        double s = (double)live[i].size;
        double w = (double)heap_table_weight(live[i].size);
        total += w;
        var += w * (w - s);
    }
    real_free(live);
    r->sampled_inuse = (int64_t)total;
    r->sampled_stddev = (int64_t)fm_sqrt(var);
    r->sampled_live = (long)n;
}

/* ---- the parts -------------------------------------------------------------- */

static int64_t take(int64_t *pool, int64_t want)
{
    if (want < 0)
        want = 0;
    int64_t got = want < *pool ? want : *pool;
    *pool -= got;
    return got;
}

static void split(struct memory_report *r)
{
    struct memory_parts *p = &r->parts;
    const struct allocator_view *a = &r->alloc;
    p->file_backed = r->rollup.rss - r->rollup.anon;
    int64_t anon = r->rollup.anon;
    /* The agent's pages first (they may sit in any anonymous mapping),
     * then the classes smaps shows, then the allocator's figures out of
     * the anonymous pages no class claimed. */
    p->agent = take(&anon, r->agent_resident);
    /* The agent's thread stacks are stack-shaped too: not twice. */
    p->thread_stacks = take(&anon, r->stacks_rss - r->agent_stack_resident);
    int64_t arenas = take(&anon, r->brk_heap_rss + r->arena_heaps_rss);
    if (strcmp(a->name, "glibc") == 0) {
        p->malloc_inuse = take(&arenas, a->uordblks);
        p->malloc_free = arenas;
        p->malloc_mmapped = take(&anon, a->hblkhd);
        r->malloc_trimmable = p->malloc_free;
    } else {
        anon += arenas;
        int64_t resident = take(&anon, a->resident);
        p->malloc_inuse = take(&resident, a->allocated);
        p->malloc_free = resident;
        r->malloc_trimmable = a->pageheap_free >= 0 ? a->pageheap_free : -1;
    }
    p->other_anonymous = anon;
}

int memory_read(struct memory_report *out)
{
    memset(out, 0, sizeof *out);
    out->time_ns = agent_now_ns();
    int err = maps_read_rollup(&out->rollup);
    if (err)
        return err;
    out->rss = out->rollup.rss;
    struct smaps_entry *v = NULL;
    size_t n = 0;
    if (maps_read_smaps(&v, &n) == 0) {
        classify(v, n, out);
        real_free(v);
    }
    struct own_memory_usage own;
    own_memory_usage(&own);
    out->agent_resident = (int64_t)own.resident;
    out->agent_mapped = (int64_t)own.mapped;
    out->agent_stack_resident = (int64_t)own.stack_resident;
    out->agent_ranges_dropped = own.dropped;
    allocator_read(&out->alloc);
    sampled_read(out);
    split(out);
    return 0;
}
