/*
 * The two loops every stack-table profile shares (heap, allocs, peak,
 * block, mutex, threadcreate, goroutine, custom): stack records as samples
 * of a profile.proto, and stack records as Go's legacy debug=1 text ("...
 * @ 0x... 0x..." then one "#\t..." line per frame). What differs between
 * kinds (sample types, values, headline, order) stays with each kind's
 * writer. Runs on the agent's server threads only.
 */
#include "encoder/encoder.h"
#include "agent/core/real.h"

#include "agent/core/labels.h"
#include "agent/stacks/stack.h"
#include "agent/symbols/symbols.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Deeper stacks are cut at the outermost frames. */
#define MAX_DEPTH 256

static int all_zero(const struct stack_record *r)
{
    for (size_t v = 0; v < STACK_RECORD_VALUES; v++)
        if (r->values[v] != 0)
            return 0;
    return 1;
}

int stack_records_proto(struct profile *p, const struct stack_record *recs,
                        size_t n, size_t nvalues, struct pbuf *out)
{
    struct stack_encoder *se = stacks_begin(p);
    if (!se)
        return -ENOMEM;
    uint64_t ids[MAX_DEPTH];
    for (size_t i = 0; i < n; i++) {
        const struct stack_record *r = &recs[i];
        if (all_zero(r))
            continue;
        size_t depth = (size_t)r->depth;
        if (depth > MAX_DEPTH)
            depth = MAX_DEPTH;
        size_t nids = stacks_locations(se, r->pcs, depth, ids);
        struct profile_label labels[2 + LABELS_MAX_PAIRS];
        size_t nlabels = 0;
        if (r->bytes)
            labels[nlabels++] = (struct profile_label){"bytes", NULL, r->bytes,
                                                       NULL};
        if (r->age)
            labels[nlabels++] = (struct profile_label){"age", r->age, 0,
                                                       NULL};
        nlabels += labels_to_profile(r->labels, labels + nlabels);
        profile_sample(p, ids, nids, r->values, nvalues, labels, nlabels);
    }
    stacks_end(se);
    return profile_write_gzip(p, out);
}

static int text_order(const void *a, const void *b, void *arg)
{
    const struct stack_record *x = a, *y = b;
    const struct stack_text_form *form = arg;
    for (int k = 0; k < form->nkeys; k++) {
        int64_t vx = x->values[form->keys[k]], vy = y->values[form->keys[k]];
        if (vx != vy)
            return ORDER(vy, vx);
    }
    if (!form->tiebreak)
        return 0;
    int c = ORDER(x->depth, y->depth);
    if (c == 0)
        c = memcmp(x->pcs, y->pcs, (size_t)x->depth * sizeof *x->pcs);
    return c ? c : ORDER(x->labels, y->labels);
}

/* The "@" list carries return addresses, as Go prints them; a location
 * address is the call site, one less. Pseudo frames are printed as they
 * are so the line still parses. */
static uintptr_t raw_address(uintptr_t pc)
{
    return pc < FRAME_PSEUDO_MAX ? pc : pc + 1;
}

int stack_records_text(const struct stack_record *recs, size_t n,
                       const struct stack_text_form *form, struct pbuf *out)
{
    struct stack_record *sorted = real_malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return -ENOMEM;
    memcpy(sorted, recs, n * sizeof *sorted);
    /* glibc's qsort_r is a merge sort, stable as qsort: equal records keep
     * their order. */
    qsort_r(sorted, n, sizeof *sorted, text_order, (void *)form);

    stacks_text_begin();
    for (size_t i = 0; i < n; i++) {
        const struct stack_record *r = &sorted[i];
        if (all_zero(r))
            continue;
        form->headline(r, out);
        pbuf_puts(out, " @");
        for (int f = 0; f < r->depth; f++)
            if (!stacks_hidden(r->pcs[f], (size_t)f))
                pbuf_printf(out, " %#lx",
                            (unsigned long)raw_address(r->pcs[f]));
        if (r->depth == 0)
            pbuf_puts(out, " 0x0");
        pbuf_puts(out, "\n");
        if (form->labels)
            labels_put_text(out, "# labels: ", r->labels);
        for (int f = 0; f < r->depth; f++)
            if (!stacks_hidden(r->pcs[f], (size_t)f))
                stacks_describe(r->pcs[f], out);
        pbuf_puts(out, "\n");
    }
    stacks_text_end();
    real_free(sorted);
    return out->oom ? -ENOMEM : 0;
}
