/*
 * /debug/memory as JSON: RSS, its parts (non-overlapping, summing to it)
 * and beside them the details each part was derived from. The figures
 * come from agent/heap/memory.c; this file only writes them. Runs on the
 * agent's server threads.
 */
#include "encoder/encoder.h"

#include "agent/heap/memory.h"

#include <errno.h>
#include <string.h>

/* One JSON member: a key and its figure, -1 when the source did not give
 * it (written as null). */
struct field {
    const char *key;
    int64_t v;
};

/* The members of fields, comma-separated; a trailing ", " unless last. */
static void put_fields(struct pbuf *b, const struct field *f, size_t n,
                       int last)
{
    for (size_t i = 0; i < n; i++) {
        const char *sep = last && i + 1 == n ? "" : ", ";
        if (f[i].v < 0)
            pbuf_printf(b, "\"%s\": null%s", f[i].key, sep);
        else
            pbuf_printf(b, "\"%s\": %lld%s", f[i].key, (long long)f[i].v,
                        sep);
    }
}

#define PUT(b, fields, last)                                                   \
    put_fields(b, fields, sizeof fields / sizeof fields[0], last)

static void put_allocator(struct pbuf *b, const struct memory_report *r)
{
    const struct allocator_view *a = &r->alloc;
    pbuf_printf(b, "\"allocator\": {\"name\": \"%s\", ", a->name);
    if (strcmp(a->name, "glibc") == 0) {
        const struct field f[] = {
            {"arena_bytes", a->arena},     {"inuse_bytes", a->uordblks},
            {"free_bytes", a->fordblks},   {"free_chunks", a->ordblks},
            {"mmap_bytes", a->hblkhd},     {"mmap_chunks", a->hblks},
            {"top_releasable_bytes", a->keepcost},
        };
        PUT(b, f, 0);
    } else if (strcmp(a->name, "jemalloc") == 0) {
        const struct field f[] = {
            {"allocated_bytes", a->allocated}, {"active_bytes", a->active},
            {"resident_bytes", a->resident},   {"mapped_bytes", a->mapped},
            {"retained_bytes", a->retained},   {"metadata_bytes", a->metadata},
        };
        PUT(b, f, 0);
    } else {
        const struct field f[] = {
            {"allocated_bytes", a->allocated},
            {"heap_bytes", a->heap_size},
            {"free_bytes", a->pageheap_free},
            {"unmapped_bytes", a->pageheap_unmapped},
        };
        PUT(b, f, 0);
    }
    const struct field trim[] = {{"trimmable_bytes", r->malloc_trimmable}};
    PUT(b, trim, 1);
    pbuf_puts(b, "}");
}

int memory_report_json(const struct memory_report *r, struct pbuf *b)
{
    const struct memory_parts *p = &r->parts;
    int64_t sum = p->malloc_inuse + p->malloc_free + p->malloc_mmapped +
                  p->thread_stacks + p->agent + p->file_backed +
                  p->other_anonymous;
    const struct field rss[] = {{"rss", r->rss}};
    const struct field parts[] = {
        {"malloc_inuse", p->malloc_inuse},
        {"malloc_free", p->malloc_free},
        {"malloc_mmapped", p->malloc_mmapped},
        {"thread_stacks", p->thread_stacks},
        {"agent", p->agent},
        {"file_backed", p->file_backed},
        {"other_anonymous", p->other_anonymous},
    };
    const struct field parts_sum[] = {{"parts_sum", sum}};
    const struct field sampled[] = {
        {"inuse_bytes", r->sampled_inuse},
        {"stddev_bytes", r->sampled_stddev},
        {"live_samples", r->sampled_live},
        {"rate", r->heap_rate},
    };
    const struct field smaps[] = {
        {"rollup_rss", r->rollup.rss},
        {"rollup_pss", r->rollup.pss},
        {"rollup_anonymous", r->rollup.anon},
        {"rollup_swap", r->rollup.swap},
        {"anonymous", r->anon_rss},
        {"brk_heap", r->brk_heap_rss},
        {"arena_heaps", r->arena_heaps_rss},
        {"arena_heap_count", r->arena_heaps},
        {"stacks", r->stacks_rss},
        {"stack_count", r->stacks},
    };
    const struct field agent[] = {
        {"resident_bytes", r->agent_resident},
        {"stacks_resident_bytes", r->agent_stack_resident},
        {"mapped_bytes", r->agent_mapped},
        {"heap_table_mapped_bytes", r->heap_table_mapped},
        {"ranges_not_tracked", r->agent_ranges_dropped},
    };
    pbuf_printf(b, "{\"time_unix_ms\": %lld, ", (long long)(r->time_ns / 1000000));
    PUT(b, rss, 0);
    pbuf_puts(b, "\"parts\": {");
    PUT(b, parts, 1);
    pbuf_puts(b, "}, ");
    PUT(b, parts_sum, 0);
    pbuf_puts(b, "\"sampled_heap\": {");
    PUT(b, sampled, 1);
    pbuf_puts(b, "}, ");
    put_allocator(b, r);
    pbuf_puts(b, ", \"smaps\": {");
    PUT(b, smaps, 1);
    pbuf_puts(b, "}, \"agent\": {");
    PUT(b, agent, 1);
    pbuf_puts(b, "}}\n");
    return b->oom ? -ENOMEM : 0;
}
