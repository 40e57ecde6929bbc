/*
 * stacks.c is the glue between the symbolizer (agent/symbols/symbols.h) and the
 * profile builder: it adds one Mapping per executable segment (main
 * executable first), one Location per distinct address with its inlined
 * Lines, one Function per distinct name, and the has_* flags a mapping
 * earns when every one of its locations was resolved. It also formats
 * frames for Go's legacy debug=1 text.
 *
 * Entered from HTTP worker threads while a profile is encoded. It holds
 * the symbolizer lock from stacks_begin() to stacks_end(), so every string
 * the symbolizer returns stays valid meanwhile; it must never be used from
 * a signal handler or an interposed call.
 */
#include "encoder/encoder.h"
#include "agent/core/real.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "agent/stacks/stack.h"
#include "agent/symbols/symbols.h"

/* Inlining deeper than this is cut at the outermost frames. */
#define MAX_FRAMES 32

#define ALL_FLAGS                                                              \
    (PROFILE_HAS_FUNCTIONS | PROFILE_HAS_FILENAMES |                           \
     PROFILE_HAS_LINE_NUMBERS | PROFILE_HAS_INLINE_FRAMES)

struct stack_encoder {
    struct profile *p;
    size_t nmaps;
    uint64_t *mapping_ids; /* by symbolizer mapping index */
    int *flags;            /* AND of the flags of the mapping's locations */
    unsigned char *used;   /* the mapping has at least one location */
    uint64_t pseudo_ids[FRAME_PSEUDO_KINDS];
    int raw; /* addresses only: no symbolization */
};

/* Set by stacks_addresses_only() for the calling thread. */
static __thread int addresses_only;

void stacks_addresses_only(int on)
{
    addresses_only = on;
}

struct stack_encoder *stacks_begin(struct profile *p)
{
    struct stack_encoder *se = real_calloc(1, sizeof *se);
    if (!se)
        return NULL;
    se->p = p;
    se->raw = addresses_only;
    symbols_lock();
    /* A failed refresh leaves the previous list (or none): locations then
     * come out unsymbolized, which pprof can still repair from binaries. */
    symbols_refresh();
    size_t n = symbols_mapping_count();
    se->nmaps = n;
    se->mapping_ids = real_calloc(n ? n : 1, sizeof *se->mapping_ids);
    se->flags = real_calloc(n ? n : 1, sizeof *se->flags);
    se->used = real_calloc(n ? n : 1, 1);
    if (!se->mapping_ids || !se->flags || !se->used)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        const struct sym_mapping *m = symbols_mapping_at(i);
        se->mapping_ids[i] =
            profile_mapping(p, m->start, m->limit, m->offset, m->path,
                            m->build_id && m->build_id[0] ? m->build_id : NULL);
        if (!se->mapping_ids[i])
            goto fail;
        se->flags[i] = ALL_FLAGS;
    }
    return se;
fail:
    symbols_unlock();
    real_free(se->mapping_ids);
    real_free(se->flags);
    real_free(se->used);
    real_free(se);
    return NULL;
}

/* Pseudo frames share one location per kind, remembered here. Its
 * address is the kind's own small number, in no mapping: a location
 * without an address is one that scrapers such as Grafana Alloy reject
 * (scrape_conformance), and no code lies at those addresses. */
static uint64_t pseudo_location(struct stack_encoder *se, uintptr_t pc)
{
    /* Each named kind its own (a location is named by the first pc that
     * made it); any other small value is [unknown]. */
    size_t k = pc < FRAME_PSEUDO_KINDS ? pc : FRAME_UNKNOWN;
    if (k == 0)
        k = FRAME_UNKNOWN;
    if (se->pseudo_ids[k])
        return se->pseudo_ids[k];
    const char *name = symbols_pseudo_name(pc);
    struct profile_line line = {
        .function_id = profile_function(se->p, name, name, NULL, 0),
    };
    if (!line.function_id)
        return 0;
    se->pseudo_ids[k] = profile_location(se->p, 0, (uint64_t)k, &line, 1);
    return se->pseudo_ids[k];
}

static uint64_t new_location(struct stack_encoder *se, uintptr_t pc)
{
    struct sym_frame fr[MAX_FRAMES];
    struct profile_line lines[MAX_FRAMES];
    int n = se->raw ? 0 : symbols_resolve(pc, fr, MAX_FRAMES);
    int flags = n > 0 ? ALL_FLAGS : 0;
    size_t nlines = 0;
    for (int i = 0; i < n; i++) {
        uint64_t fid = profile_function(se->p, fr[i].name, fr[i].system_name,
                                        fr[i].file, fr[i].start_line);
        if (!fid)
            return 0;
        lines[nlines++] = (struct profile_line){fid, fr[i].line};
        /* A file name means DWARF covered the address, which is also what
         * makes the list of inlined frames complete. */
        if (!fr[i].file)
            flags &= ~(PROFILE_HAS_FILENAMES | PROFILE_HAS_INLINE_FRAMES);
        if (fr[i].line <= 0)
            flags &= ~PROFILE_HAS_LINE_NUMBERS;
        /* A name made from the unwind tables is no symbol: pprof, given
         * the binary or its debug file, may still name it properly. */
        if (fr[i].unwind_named)
            flags = 0;
    }
    int mi = symbols_mapping_index(pc);
    uint64_t mapping_id = 0;
    if (mi >= 0 && (size_t)mi < se->nmaps) {
        mapping_id = se->mapping_ids[mi];
        se->flags[mi] &= flags;
        se->used[mi] = 1;
    }
    return profile_location(se->p, mapping_id, pc, lines, nlines);
}

int stacks_hidden(uintptr_t pc, size_t i)
{
    /* The agent's own frames between host frames (the thread start
     * wrapper, an interposer) are not the host's code: they are left out,
     * as Go hides its runtime frames. A leaf inside the agent stays, so
     * time spent there is not misattributed. */
    return i > 0 && pc >= stack_self_start && pc < stack_self_end;
}

size_t stacks_locations(struct stack_encoder *se, const uintptr_t *pcs,
                        size_t n, uint64_t *ids)
{
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        uintptr_t pc = pcs[i];
        uint64_t id;
        if (stacks_hidden(pc, i))
            continue;
        if (pc < FRAME_PSEUDO_MAX) {
            id = pseudo_location(se, pc);
        } else {
            /* The profile's own location index says whether this address
             * was symbolized already. */
            id = profile_find_location(se->p, pc);
            if (!id)
                id = new_location(se, pc);
        }
        /* Out of memory: the frame is dropped rather than the sample. */
        if (id)
            ids[out++] = id;
    }
    return out;
}

void stacks_text_begin(void)
{
    symbols_lock();
    symbols_refresh();
}

void stacks_text_end(void)
{
    symbols_unlock();
}

void stacks_describe(uintptr_t pc, struct pbuf *out)
{
    struct sym_frame fr[MAX_FRAMES];
    int n = pc < FRAME_PSEUDO_MAX ? 0 : symbols_resolve(pc, fr, MAX_FRAMES);
    if (n == 0) {
        /* A pseudo frame says what it stands for ("[truncated]"), as the
         * proto form does. */
        const char *pseudo = pc < FRAME_PSEUDO_MAX ? symbols_pseudo_name(pc)
                                                   : NULL;
        if (pseudo)
            pbuf_printf(out, "#\t0x%" PRIxPTR "\t%s\n", pc, pseudo);
        else
            pbuf_printf(out, "#\t0x%" PRIxPTR "\n", pc);
        return;
    }
    /* Go prints the same pc for every inlined frame, with the offset from
     * the physical function's entry. */
    for (int i = 0; i < n; i++) {
        uintptr_t off = fr[i].sym_start ? pc - fr[i].sym_start : 0;
        pbuf_printf(out, "#\t0x%" PRIxPTR "\t%s+0x%" PRIxPTR "\t%s:%d\n", pc,
                    fr[i].name, off, fr[i].file ? fr[i].file : "",
                    fr[i].line);
    }
}

void stacks_end(struct stack_encoder *se)
{
    if (!se)
        return;
    /* As Go does, a mapping with no location earns no flag: there was
     * nothing to resolve, and pprof may still want to try. */
    for (size_t i = 0; i < se->nmaps; i++)
        if (se->used[i] && se->flags[i])
            profile_mapping_flags(se->p, se->mapping_ids[i], se->flags[i]);
    symbols_unlock();
    real_free(se->mapping_ids);
    real_free(se->flags);
    real_free(se->used);
    real_free(se);
}
