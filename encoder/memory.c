/*
 * /debug/memory as JSON: RSS, its parts (non-overlapping, summing to it)
 * and beside them the details each part was derived from. The figures
 * come from agent/memory.c; this file only writes them. Runs on the
 * agent's server threads.
 */
#include "encoder/encoder.h"

#include "agent/memory.h"

#include <errno.h>
#include <string.h>

/* "key": v, with null for a figure the source did not give (-1). */
static void put(struct pbuf *b, const char *key, int64_t v, int last)
{
    if (v < 0)
        pbuf_printf(b, "\"%s\": null%s", key, last ? "" : ", ");
    else
        pbuf_printf(b, "\"%s\": %lld%s", key, (long long)v, last ? "" : ", ");
}

static void put_allocator(struct pbuf *b, const struct memory_report *r)
{
    const struct allocator_view *a = &r->alloc;
    pbuf_printf(b, "\"allocator\": {\"name\": \"%s\", ", a->name);
    if (strcmp(a->name, "glibc") == 0) {
        put(b, "arena_bytes", a->arena, 0);
        put(b, "inuse_bytes", a->uordblks, 0);
        put(b, "free_bytes", a->fordblks, 0);
        put(b, "free_chunks", a->ordblks, 0);
        put(b, "mmap_bytes", a->hblkhd, 0);
        put(b, "mmap_chunks", a->hblks, 0);
        put(b, "top_releasable_bytes", a->keepcost, 0);
    } else if (strcmp(a->name, "jemalloc") == 0) {
        put(b, "allocated_bytes", a->allocated, 0);
        put(b, "active_bytes", a->active, 0);
        put(b, "resident_bytes", a->resident, 0);
        put(b, "mapped_bytes", a->mapped, 0);
        put(b, "retained_bytes", a->retained, 0);
        put(b, "metadata_bytes", a->metadata, 0);
    } else {
        put(b, "allocated_bytes", a->allocated, 0);
        put(b, "heap_bytes", a->heap_size, 0);
        put(b, "free_bytes", a->pageheap_free, 0);
        put(b, "unmapped_bytes", a->pageheap_unmapped, 0);
    }
    put(b, "trimmable_bytes", r->malloc_trimmable, 1);
    pbuf_puts(b, "}");
}

int memory_report_json(const struct memory_report *r, struct pbuf *b)
{
    const struct memory_parts *p = &r->parts;
    int64_t sum = p->malloc_inuse + p->malloc_free + p->malloc_mmapped +
                  p->thread_stacks + p->agent + p->file_backed +
                  p->other_anonymous;
    pbuf_printf(b, "{\"time_unix_ms\": %lld, ", (long long)(r->time_ns / 1000000));
    put(b, "rss", r->rss, 0);
    pbuf_puts(b, "\"parts\": {");
    put(b, "malloc_inuse", p->malloc_inuse, 0);
    put(b, "malloc_free", p->malloc_free, 0);
    put(b, "malloc_mmapped", p->malloc_mmapped, 0);
    put(b, "thread_stacks", p->thread_stacks, 0);
    put(b, "agent", p->agent, 0);
    put(b, "file_backed", p->file_backed, 0);
    put(b, "other_anonymous", p->other_anonymous, 1);
    pbuf_puts(b, "}, ");
    put(b, "parts_sum", sum, 0);

    pbuf_puts(b, "\"sampled_heap\": {");
    put(b, "inuse_bytes", r->sampled_inuse, 0);
    put(b, "stddev_bytes", r->sampled_stddev, 0);
    put(b, "live_samples", r->sampled_live, 0);
    put(b, "rate", r->heap_rate, 1);
    pbuf_puts(b, "}, ");
    put_allocator(b, r);
    pbuf_puts(b, ", \"smaps\": {");
    put(b, "rollup_rss", r->rollup.rss, 0);
    put(b, "rollup_pss", r->rollup.pss, 0);
    put(b, "rollup_anonymous", r->rollup.anon, 0);
    put(b, "rollup_swap", r->rollup.swap, 0);
    put(b, "anonymous", r->anon_rss, 0);
    put(b, "brk_heap", r->brk_heap_rss, 0);
    put(b, "arena_heaps", r->arena_heaps_rss, 0);
    put(b, "arena_heap_count", r->arena_heaps, 0);
    put(b, "stacks", r->stacks_rss, 0);
    put(b, "stack_count", r->stacks, 1);
    pbuf_puts(b, "}, \"agent\": {");
    put(b, "resident_bytes", r->agent_resident, 0);
    put(b, "stacks_resident_bytes", r->agent_stack_resident, 0);
    put(b, "mapped_bytes", r->agent_mapped, 0);
    put(b, "heap_table_mapped_bytes", r->heap_table_mapped, 0);
    put(b, "ranges_not_tracked", r->agent_ranges_dropped, 1);
    pbuf_puts(b, "}}\n");
    return b->oom ? -ENOMEM : 0;
}
