/*
 * Compiles an object's DWARF call-frame information (.eh_frame, found
 * through .eh_frame_hdr's sorted search table) into the rows of
 * agent/stacks/cfi.h: for each address range, how to find the caller's stack
 * pointer, return address and frame pointer. What is particular to the
 * architecture (register numbers, the return address's place, the PLT's
 * expression) comes from agent/stacks/cfi_arch.h.
 *
 * Runs in normal context only (cfi_tables.c), reading the object's own
 * loaded sections; it never allocates through malloc (rows go where the
 * caller's grow() puts them). Only what the walker can use is kept: the
 * CFA rule when it is a register the walker tracks plus an offset (or one
 * of two expressions: a dereferenced register, and the PLT's), the frame
 * pointer's rule, and whether the return address is at CFA - 8. Anything
 * else becomes CFI_CFA_UNKNOWN, where the walker uses frame pointers.
 */
#include "agent/stacks/cfi.h"

#include "agent/stacks/cfi_arch.h"
#include "agent/compiler.h"

#include <string.h>

/* DWARF register numbers (agent/stacks/cfi_arch.h). */
#define REG_FP CFI_DWARF_FP
#define REG_SP CFI_DWARF_SP
#define REG_RA CFI_DWARF_RA

/* Pointer encodings (DW_EH_PE_*). */
#define PE_OMIT 0xff
#define PE_FORMAT 0x0f
#define PE_APPLY 0x70
#define PE_INDIRECT 0x80
#define PE_PCREL 0x10
#define PE_DATAREL 0x30

struct cursor {
    const uint8_t *p, *end;
    int bad;
};

/* The bits of a LEB128 number, how many bits were read (*shift) and its
 * last byte (*last); 0 with the cursor marked bad when the input ends
 * inside it. */
static uint64_t leb_bits(struct cursor *c, int *shift, uint8_t *last)
{
    uint64_t v = 0;
    *shift = 0;
    *last = 0;
    while (c->p < c->end) {
        uint8_t b = *c->p++;
        if (*shift < 64)
            v |= (uint64_t)(b & 0x7f) << *shift;
        *shift += 7;
        if (!(b & 0x80)) {
            *last = b;
            return v;
        }
    }
    c->bad = 1;
    return 0;
}

static uint64_t uleb(struct cursor *c)
{
    int shift;
    uint8_t last;
    return leb_bits(c, &shift, &last);
}

static int64_t sleb(struct cursor *c)
{
    int shift;
    uint8_t last;
    uint64_t v = leb_bits(c, &shift, &last);
    if (shift < 64 && (last & 0x40))
        v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

static uint64_t fixed(struct cursor *c, size_t size)
{
    if ((size_t)(c->end - c->p) < size) {
        c->bad = 1;
        c->p = c->end;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, c->p, size); /* little-endian */
    c->p += size;
    return v;
}

/* Reads a pointer in encoding enc; datarel is the base for DW_EH_PE_datarel.
 * Indirect pointers are not followed (only personality routines use them,
 * and they are only skipped). */
static uintptr_t encoded(struct cursor *c, uint8_t enc, uintptr_t datarel)
{
    if (enc == PE_OMIT)
        return 0;
    uintptr_t field = (uintptr_t)c->p;
    uint64_t v;
    switch (enc & PE_FORMAT) {
    case 0x00: v = fixed(c, 8); break;
    case 0x01: v = uleb(c); break;
    case 0x02: v = fixed(c, 2); break;
    case 0x03: v = fixed(c, 4); break;
    case 0x04: v = fixed(c, 8); break;
    case 0x09: v = (uint64_t)sleb(c); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)fixed(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)fixed(c, 4); break;
    case 0x0c: v = fixed(c, 8); break;
    default: c->bad = 1; return 0;
    }
    switch (enc & PE_APPLY) {
    case 0x00: break;
    case PE_PCREL: v += field; break;
    case PE_DATAREL: v += datarel; break;
    default: c->bad = 1; return 0; /* textrel, funcrel: not on x86-64 */
    }
    return (uintptr_t)v;
}

/* A register's rule, as far as the walker cares. */
enum how { SAME, UNDEF, OFFSET, EXPR, INREG, OTHER };

struct rule {
    uint8_t how;
    int64_t off;
    const uint8_t *expr;
    size_t len;
};

struct state {
    int cfa_expr; /* 0: register + offset; 1: expression */
    uint64_t cfa_reg;
    int64_t cfa_off;
    const uint8_t *expr;
    size_t len;
    struct rule fp, ra;
};

/* Where a frame description comes from: .eh_frame (loaded, pointers as
 * its encodings say) or .debug_frame (read from the file: a CIE's id is
 * all ones, an FDE points to its CIE by offset from the section's start,
 * addresses are link-time ones, to be moved by the load bias). */
struct source {
    int debug;
    const uint8_t *section; /* .debug_frame's first byte */
    uintptr_t bias;         /* added to .debug_frame's addresses */
};

struct cie {
    uintptr_t loc_bias; /* added to DW_CFA_set_loc's addresses */
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int signal;
    int has_aug_data;
    const uint8_t *insns, *end;
};

static int parse_cie(const uint8_t *at, const uint8_t *limit, struct cie *out,
                     const struct source *src)
{
    struct cursor c = {at, limit, 0};
    uint64_t len = fixed(&c, 4);
    if (len == 0xffffffff) {
        if (src->debug)
            return -1; /* 64-bit DWARF: not written for x86-64 code */
        len = fixed(&c, 8);
    }
    if (c.bad || len > (uint64_t)(limit - c.p))
        return -1;
    c.end = c.p + len;
    /* A CIE's id is 0 in .eh_frame, all ones in .debug_frame. */
    if (fixed(&c, 4) != (src->debug ? 0xffffffffu : 0))
        return -1;
    uint8_t version = (uint8_t)fixed(&c, 1);
    if (version != 1 && version != 3 && version != 4)
        return -1;
    const char *aug = (const char *)c.p;
    size_t aug_len = strnlen(aug, (size_t)(c.end - c.p));
    if (aug_len == (size_t)(c.end - c.p))
        return -1;
    c.p += aug_len + 1;
    if (version == 4)
        c.p += 2; /* address and segment sizes */
    memset(out, 0, sizeof *out);
    out->loc_bias = src->debug ? src->bias : 0;
    out->code_align = uleb(&c);
    out->data_align = sleb(&c);
    out->ra_reg = version == 1 ? fixed(&c, 1) : uleb(&c);
    out->fde_enc = 0; /* absptr */
    const uint8_t *aug_end = NULL;
    for (size_t i = 0; i < aug_len && !c.bad; i++) {
        switch (aug[i]) {
        case 'z': {
            uint64_t n = uleb(&c);
            if (n > (uint64_t)(c.end - c.p))
                return -1;
            aug_end = c.p + n;
            out->has_aug_data = 1;
            break;
        }
        case 'R': out->fde_enc = (uint8_t)fixed(&c, 1); break;
        case 'L': fixed(&c, 1); break;
        case 'P': {
            uint8_t enc = (uint8_t)fixed(&c, 1);
            encoded(&c, enc & (uint8_t)~PE_INDIRECT, 0);
            break;
        }
        case 'S': out->signal = 1; break;
        case 'B': break; /* AArch64 pointer authentication */
        default:
            /* Unknown letters: 'z' says how much to skip, or give up. */
            if (!aug_end)
                return -1;
            i = aug_len;
            break;
        }
    }
    if (aug_end)
        c.p = aug_end;
    if (c.bad || c.p > c.end)
        return -1;
    out->insns = c.p;
    out->end = c.end;
    return 0;
}

/* An expression that is one DW_OP_bregN (N = the stack or frame pointer)
 * with an offset, optionally followed by DW_OP_deref. Sets *reg, *off,
 * *deref; returns 0, or -1 for anything else. */
static int breg_expr(const uint8_t *e, size_t len, int *reg, int64_t *off,
                     int *deref)
{
    if (len < 2 || (e[0] != 0x70 + REG_SP && e[0] != 0x70 + REG_FP))
        return -1;
    struct cursor c = {e + 1, e + len, 0};
    *reg = e[0] - 0x70;
    *off = sleb(&c);
    *deref = 0;
    if (c.p < c.end && *c.p == 0x06) { /* DW_OP_deref */
        *deref = 1;
        c.p++;
    }
    return c.bad || c.p != c.end ? -1 : 0;
}

static int fits16(int64_t v) { return v >= INT16_MIN && v <= INT16_MAX; }
static int fits32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

static struct cfi_row compile(const struct state *s, int signal)
{
    struct cfi_row r = {0, CFI_CFA_UNKNOWN, CFI_FP_SAME, 0, 0};
    if (signal) {
        r.cfa = CFI_CFA_SIGNAL;
        return r;
    }
    if (s->ra.how == UNDEF) {
        r.cfa = CFI_CFA_END;
        return r;
    }
    /* The return address in a register (libgcc's jump to a landing
     * pad): the CFA from the stack pointer, the frame pointer as it is. */
    if (s->ra.how == INREG && !s->cfa_expr && s->cfa_reg == REG_SP &&
        fits32(s->cfa_off) && s->fp.how == SAME && s->ra.off >= 0 &&
        s->ra.off <= INT16_MAX) {
        r.cfa = CFI_CFA_SP_RA_REG;
        r.cfa_off = (int32_t)s->cfa_off;
        r.fp_off = (int16_t)s->ra.off;
        return r;
    }
    if (s->ra.how != OFFSET || s->ra.off != CFI_RA_AT_CFA)
        return r;
    if (!s->cfa_expr) {
        if (!fits32(s->cfa_off))
            return r;
        if (s->cfa_reg == REG_SP)
            r.cfa = CFI_CFA_SP;
        else if (s->cfa_reg == REG_FP)
            r.cfa = CFI_CFA_FP;
        else
            return r;
        r.cfa_off = (int32_t)s->cfa_off;
    } else {
        int reg, deref;
        int64_t off;
        int n = cfi_arch_plt_threshold(s->expr, s->len);
        if (n >= 0) {
            r.cfa = CFI_CFA_PLT;
            r.cfa_off = n;
        } else if (breg_expr(s->expr, s->len, &reg, &off, &deref) == 0 &&
                   deref && fits32(off)) {
            r.cfa = reg == REG_SP ? CFI_CFA_DEREF_SP : CFI_CFA_DEREF_FP;
            r.cfa_off = (int32_t)off;
        } else {
            return r;
        }
    }
    switch (s->fp.how) {
    case SAME:
        break;
    case OFFSET:
        if (fits16(s->fp.off)) {
            r.fp = CFI_FP_AT_CFA;
            r.fp_off = (int16_t)s->fp.off;
        } else {
            r.fp = CFI_FP_UNKNOWN;
        }
        break;
    case EXPR: {
        int reg, deref;
        int64_t off;
        if (breg_expr(s->fp.expr, s->fp.len, &reg, &off, &deref) == 0 &&
            !deref && fits16(off)) {
            r.fp = reg == REG_SP ? CFI_FP_AT_SP : CFI_FP_AT_FP;
            r.fp_off = (int16_t)off;
        } else {
            r.fp = CFI_FP_UNKNOWN;
        }
        break;
    }
    default:
        r.fp = CFI_FP_UNKNOWN;
        break;
    }
    return r;
}

struct emitter {
    struct cfi_out *out;
    uintptr_t base;
    int oom;
    /* Lookup mode (out == NULL): keep only the row in force at target. */
    uintptr_t target;
    struct cfi_row found;
    int have;
};

static int same_rules(const struct cfi_row *a, const struct cfi_row *b)
{
    return a->cfa == b->cfa && a->fp == b->fp && a->fp_off == b->fp_off &&
           a->cfa_off == b->cfa_off;
}

/* Appends a row at address at; a row at the same address as the last one
 * replaces it (the later rule wins), a row with the last one's rules is
 * not needed, and a row before the last one (overlapping descriptions)
 * is dropped. */
static int emit(struct emitter *em, uintptr_t at, struct cfi_row r)
{
    struct cfi_out *o = em->out;
    if (!o) {
        if (at <= em->target) {
            em->found = r;
            em->have = 1;
        }
        return 0;
    }
    r.start = (uint32_t)(at - em->base);
    if (o->n > 0) {
        struct cfi_row *last = &o->rows[o->n - 1];
        if (r.start < last->start)
            return 0;
        if (r.start == last->start) {
            *last = r;
            if (o->n > 1 && same_rules(&o->rows[o->n - 2], last))
                o->n--;
            return 0;
        }
        if (same_rules(last, &r))
            return 0;
    }
    if (o->n == o->cap && o->grow(o, o->n + 1) != 0) {
        em->oom = 1;
        return -1;
    }
    o->rows[o->n++] = r;
    return 0;
}

#define REMEMBER_MAX 8

static void set_rule(struct state *s, uint64_t reg, struct rule r)
{
    if (reg == REG_FP)
        s->fp = r;
    else if (reg == REG_RA)
        s->ra = r;
}

static struct rule initial_rule(const struct state *init, uint64_t reg)
{
    struct rule same = {SAME, 0, NULL, 0};
    if (reg == REG_FP)
        return init->fp;
    if (reg == REG_RA)
        return init->ra;
    return same;
}

/* The instructions that define the CFA (def_cfa and its variants) on
 * state s. Returns 0, or -1 for a malformed one or another instruction. */
static int cfa_rule(struct cursor *c, struct state *s, uint8_t op,
                    const struct cie *cie)
{
    switch (op) {
    case 0x0c: /* def_cfa */
        s->cfa_reg = uleb(c);
        s->cfa_off = (int64_t)uleb(c);
        break;
    case 0x0d: s->cfa_reg = uleb(c); break; /* def_cfa_register */
    case 0x0e: s->cfa_off = (int64_t)uleb(c); return 0; /* def_cfa_offset */
    case 0x0f: { /* def_cfa_expression */
        uint64_t n = uleb(c);
        if (n > (uint64_t)(c->end - c->p))
            return -1;
        s->cfa_expr = 1;
        s->expr = c->p;
        s->len = n;
        c->p += n;
        return 0;
    }
    case 0x12: /* def_cfa_sf */
        s->cfa_reg = uleb(c);
        s->cfa_off = sleb(c) * cie->data_align;
        break;
    case 0x13: s->cfa_off = sleb(c) * cie->data_align; return 0; /* def_cfa_offset_sf */
    default:
        return -1;
    }
    s->cfa_expr = 0; /* a register's rule again */
    return 0;
}

/*
 * Runs the instructions [p, end) from state s at address *loc. With em
 * set, emits a row before each advance; init is the state after the
 * CIE's instructions (for DW_CFA_restore). Returns 0, or -1 on malformed
 * or unsupported input (the caller drops the rest of the description).
 */
static int run(const uint8_t *p, const uint8_t *end, const struct cie *cie,
               struct state *s, const struct state *init, uintptr_t *loc,
               struct emitter *em, int signal)
{
    struct cursor c = {p, end, 0};
    struct state stack[REMEMBER_MAX];
    int depth = 0;
    while (c.p < c.end && !c.bad) {
        uint8_t op = *c.p++;
        uint64_t reg, delta = 0;
        struct rule r = {SAME, 0, NULL, 0};
        switch (op >> 6) {
        case 1: delta = op & 0x3f; goto advance;
        case 2:
            r.how = OFFSET;
            r.off = (int64_t)uleb(&c) * cie->data_align;
            set_rule(s, op & 0x3f, r);
            continue;
        case 3: set_rule(s, op & 0x3f, initial_rule(init, op & 0x3f)); continue;
        }
        switch (op) {
        case 0x00: break; /* nop */
        case 0x01: /* set_loc */
            if (em && emit(em, *loc, compile(s, signal)) != 0)
                return -1;
            *loc = encoded(&c, cie->fde_enc, 0) + cie->loc_bias;
            break;
        case 0x02: delta = fixed(&c, 1); goto advance;
        case 0x03: delta = fixed(&c, 2); goto advance;
        case 0x04: delta = fixed(&c, 4); goto advance;
        case 0x05: /* offset_extended */
            reg = uleb(&c);
            r.how = OFFSET;
            r.off = (int64_t)uleb(&c) * cie->data_align;
            set_rule(s, reg, r);
            break;
        case 0x06: reg = uleb(&c); set_rule(s, reg, initial_rule(init, reg)); break;
        case 0x07: reg = uleb(&c); r.how = UNDEF; set_rule(s, reg, r); break;
        case 0x08: reg = uleb(&c); set_rule(s, reg, r); break;
        case 0x09: /* register */
            reg = uleb(&c);
            r.how = INREG;
            r.off = (int64_t)uleb(&c);
            set_rule(s, reg, r);
            break;
        case 0x0a:
            if (depth == REMEMBER_MAX)
                return -1;
            stack[depth++] = *s;
            break;
        case 0x0b: /* restore_state: the CFA rule too, as GCC expects */
            if (depth == 0)
                return -1;
            *s = stack[--depth];
            break;
        case 0x10: case 0x16: { /* expression, val_expression */
            reg = uleb(&c);
            uint64_t n = uleb(&c);
            if (n > (uint64_t)(c.end - c.p))
                return -1;
            r.how = op == 0x10 ? EXPR : OTHER;
            r.expr = c.p;
            r.len = n;
            c.p += n;
            set_rule(s, reg, r);
            break;
        }
        case 0x11: /* offset_extended_sf */
            reg = uleb(&c);
            r.how = OFFSET;
            r.off = sleb(&c) * cie->data_align;
            set_rule(s, reg, r);
            break;
        case 0x14: case 0x15: /* val_offset(_sf) */
            reg = uleb(&c);
            if (op == 0x14)
                uleb(&c);
            else
                sleb(&c);
            r.how = OTHER;
            set_rule(s, reg, r);
            break;
        case 0x2e: uleb(&c); break; /* GNU_args_size */
        case 0x2f: /* GNU_negative_offset_extended */
            reg = uleb(&c);
            r.how = OFFSET;
            r.off = -(int64_t)uleb(&c) * cie->data_align;
            set_rule(s, reg, r);
            break;
        default: /* the CFA's rule, or not an instruction known here */
            if (cfa_rule(&c, s, op, cie) != 0)
                return -1;
        }
        continue;
    advance:
        if (em && emit(em, *loc, compile(s, signal)) != 0)
            return -1;
        *loc += delta * cie->code_align;
    }
    return c.bad ? -1 : 0;
}

/* The last CIE parsed: consecutive descriptions usually share one. */
struct cie_cache {
    const uint8_t *at;
    struct cie cie;
    struct state init;
};

/* Emits the rows of the frame description entry at fde. Returns 0, or
 * -1 when it is malformed (its rows so far stay, ended by an unknown row,
 * or none) or memory ran out (em->oom). */
static int fde_rows(const uint8_t *fde, const uint8_t *limit,
                    struct cie_cache *cc, struct emitter *em,
                    uintptr_t text_lo, uintptr_t text_hi,
                    const struct source *src)
{
    struct cursor c = {fde, limit, 0};
    uint64_t len = fixed(&c, 4);
    if (len == 0xffffffff) {
        if (src->debug)
            return -1;
        len = fixed(&c, 8);
    }
    if (c.bad || len == 0 || len > (uint64_t)(limit - c.p))
        return -1;
    c.end = c.p + len;
    const uint8_t *id_at = c.p;
    uint32_t id = (uint32_t)fixed(&c, 4);
    const uint8_t *cie_at;
    if (src->debug) {
        /* The CIE's offset in the section (all ones: a CIE). */
        if (id == 0xffffffffu || id >= (uintptr_t)(limit - src->section))
            return -1;
        cie_at = src->section + id;
    } else {
        if (id == 0 || id > (uintptr_t)id_at)
            return -1; /* a CIE, not an FDE */
        cie_at = id_at - id;
    }
    if (cc->at != cie_at) {
        cc->at = NULL;
        if (parse_cie(cie_at, limit, &cc->cie, src) != 0)
            return -1;
        memset(&cc->init, 0, sizeof cc->init);
        uintptr_t loc = 0;
        if (run(cc->cie.insns, cc->cie.end, &cc->cie, &cc->init, &cc->init,
                &loc, NULL, 0) != 0)
            return -1;
        cc->at = cie_at;
    }
    const struct cie *cie = &cc->cie;
    uintptr_t begin = encoded(&c, cie->fde_enc, 0) + cie->loc_bias;
    uintptr_t range = encoded(&c, cie->fde_enc & PE_FORMAT, 0);
    if (cie->has_aug_data) {
        uint64_t n = uleb(&c);
        if (n > (uint64_t)(c.end - c.p))
            return -1;
        c.p += n;
    }
    if (c.bad || begin < text_lo || begin >= text_hi || range == 0 ||
        range > text_hi - begin)
        return 0; /* outside the code: left out */
    struct state s = cc->init;
    uintptr_t loc = begin;
    if (run(c.p, c.end, cie, &s, &cc->init, &loc, em, cie->signal) != 0) {
        /* What came before the trouble stays; the rest is unknown. */
        struct cfi_row unknown = {0, CFI_CFA_UNKNOWN, CFI_FP_SAME, 0, 0};
        if (loc >= begin && loc < begin + range)
            return emit(em, loc, unknown);
        return 0;
    }
    if (loc < begin + range && emit(em, loc, compile(&s, cie->signal)) != 0)
        return -1;
    struct cfi_row gap = {0, CFI_CFA_UNKNOWN, CFI_FP_SAME, 0, 0};
    return emit(em, begin + range, gap);
}

/* A frame description of .debug_frame, by the address it starts at. */
struct dbg_fde {
    uintptr_t begin;
    const uint8_t *at;
};

/* Shell sort (no allocation: qsort may call malloc). */
static void sort_fdes(struct dbg_fde *a, size_t n)
{
    static const size_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
    for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
        size_t gap = gaps[g];
        for (size_t i = gap; i < n; i++) {
            struct dbg_fde v = a[i];
            size_t j = i;
            while (j >= gap && a[j - gap].begin > v.begin) {
                a[j] = a[j - gap];
                j -= gap;
            }
            a[j] = v;
        }
    }
}

/* The FDEs of .debug_frame [sec, sec + size) that start in
 * [text_lo, text_hi) (link-time addresses moved by bias), sorted, in
 * memory mapped here (*bytes of it; NULL when there are none). */
static struct dbg_fde *debug_fdes(const uint8_t *sec, size_t size,
                                  uintptr_t bias, uintptr_t text_lo,
                                  uintptr_t text_hi, size_t *n,
                                  size_t *bytes, const struct cfi_out *out)
{
    *n = 0;
    *bytes = 0;
    size_t count = 0;
    for (int pass = 0; pass < 2; pass++) {
        struct dbg_fde *list = NULL;
        if (pass == 1) {
            if (count == 0)
                return NULL;
            *bytes = count * sizeof *list;
            list = out->scratch(*bytes);
            if (!list)
                return NULL;
        }
        size_t k = 0;
        struct cursor c = {sec, sec + size, 0};
        while (c.p + 4 <= c.end) {
            const uint8_t *entry = c.p;
            uint64_t len = fixed(&c, 4);
            if (len == 0xffffffff || len > (uint64_t)(c.end - c.p))
                break; /* 64-bit DWARF or a torn section */
            const uint8_t *next = c.p + len;
            if (len >= 4 + 8) {
                uint32_t id = (uint32_t)fixed(&c, 4);
                uintptr_t begin = (uintptr_t)fixed(&c, 8) + bias;
                if (id != 0xffffffffu && begin >= text_lo && begin < text_hi) {
                    if (pass == 1 && k < count) {
                        list[k].begin = begin;
                        list[k].at = entry;
                    }
                    k++;
                }
            }
            c.p = next;
        }
        if (pass == 0) {
            count = k;
        } else {
            *n = k < count ? k : count;
            sort_fdes(list, *n);
            return list;
        }
    }
    return NULL;
}

/* .eh_frame_hdr read from its start (c at hdr, bounding every read):
 * version 1, the encodings, .eh_frame's address (passed over), the
 * count. Returns the search table and its number of pairs in *count, or
 * NULL when there is none the lookups can read: (initial location, FDE
 * address) pairs, sorted, both 4-byte offsets from the header (encoding
 * 0x3b, what the GNU linkers and lld write). The caller bounds the count.
 * Reads only: in signal context too (cfi_parse_lookup). */
static inline const uint8_t *hdr_table(struct cursor *c, const uint8_t *hdr,
                                       uintptr_t *count)
{
    if (fixed(c, 1) != 1)
        return NULL;
    uint8_t ptr_enc = (uint8_t)fixed(c, 1);
    uint8_t count_enc = (uint8_t)fixed(c, 1);
    uint8_t table_enc = (uint8_t)fixed(c, 1);
    encoded(c, ptr_enc, (uintptr_t)hdr);
    *count = encoded(c, count_enc, (uintptr_t)hdr);
    return c->bad || table_enc != 0x3b || *count == 0 ? NULL : c->p;
}

int cfi_parse_tables(const uint8_t *hdr, const uint8_t *dbg, size_t dbg_size,
                     uintptr_t base, uintptr_t text_lo, uintptr_t text_hi,
                     struct cfi_out *out)
{
    const int32_t *table = NULL;
    uintptr_t count = 0;
    if (hdr) {
        /* The header has no length of its own; 16 MiB bounds the search
         * table's reads and .eh_frame's (sizes are checked field by
         * field). */
        struct cursor c = {hdr, hdr + (16u << 20), 0};
        const uint8_t *t = hdr_table(&c, hdr, &count);
        if (t && count <= (1u << 24))
            table = (const int32_t *)t;
        else
            count = 0;
    }
    size_t ndbg = 0, dbg_bytes = 0;
    struct dbg_fde *fdes =
        dbg && out->scratch ? debug_fdes(dbg, dbg_size, base, text_lo,
                                         text_hi, &ndbg, &dbg_bytes, out)
                            : NULL;
    if (count == 0 && ndbg == 0)
        return -1;
    struct emitter em = {out, base, 0, 0, {0, 0, 0, 0, 0}, 0};
    struct cie_cache cc, cc_dbg;
    memset(&cc, 0, sizeof cc);
    memset(&cc_dbg, 0, sizeof cc_dbg);
    const struct source eh = {0, NULL, 0}, debug = {1, dbg, base};
    out->n = 0;
    /* Both lists in address order: rows are emitted in order. Where
     * descriptions overlap, the one that starts first keeps its rows. */
    uintptr_t i = 0;
    size_t j = 0;
    while ((i < count || j < ndbg) && !em.oom) {
        if (i < count &&
            (j == ndbg || (uintptr_t)(hdr + table[2 * i]) <= fdes[j].begin)) {
            /* Descriptions live after the header in the same segment (the
             * GNU linkers put .eh_frame right after .eh_frame_hdr) or
             * before it. */
            const uint8_t *fde = hdr + table[2 * i + 1];
            fde_rows(fde, fde + (1u << 20), &cc, &em, text_lo, text_hi, &eh);
            i++;
        } else {
            fde_rows(fdes[j].at, dbg + dbg_size, &cc_dbg, &em, text_lo,
                     text_hi, &debug);
            j++;
        }
    }
    if (fdes)
        out->unscratch(fdes, dbg_bytes);
    return em.oom ? -1 : 0;
}

int cfi_parse_eh_frame_hdr(const uint8_t *hdr, uintptr_t base,
                           uintptr_t text_lo, uintptr_t text_hi,
                           struct cfi_out *out)
{
    return cfi_parse_tables(hdr, NULL, 0, base, text_lo, text_hi, out);
}

/* In signal context too (the walker's rule for new code): reads only,
 * on the stack's memory and the object's. */
PPROF_SIGNAL_SAFE int cfi_parse_lookup(const uint8_t *hdr, uintptr_t text_lo,
                                       uintptr_t text_hi, uintptr_t pc,
                                       struct cfi_row *out)
{
    const uint8_t *limit = hdr + (16u << 20);
    struct cursor c = {hdr, limit, 0};
    uintptr_t count;
    const int32_t *table = (const int32_t *)hdr_table(&c, hdr, &count);
    if (!table || count > (1u << 24))
        return -1;
    /* The last description starting at or before pc. */
    uintptr_t lo = 0, hi = count;
    while (lo < hi) {
        uintptr_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)(hdr + table[2 * mid]) <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const uint8_t *fde = hdr + table[2 * (lo - 1) + 1];
    struct emitter em = {NULL, 0, 0, pc, {0, 0, 0, 0, 0}, 0};
    struct cie_cache cc;
    memset(&cc, 0, sizeof cc);
    const struct source eh = {0, NULL, 0};
    if (fde_rows(fde, fde + (1u << 20), &cc, &em, text_lo, text_hi, &eh) != 0 ||
        !em.have || em.found.cfa == CFI_CFA_UNKNOWN)
        return -1;
    *out = em.found;
    return 0;
}

/* For the symbolizer, in normal context: the frame description covering
 * pc, read from a copy of the object (its file) where every read is
 * checked against [lo, hi). */
int cfi_parse_function_start(const uint8_t *hdr, const uint8_t *lo,
                             const uint8_t *hi, uintptr_t pc,
                             uintptr_t *start)
{
    if (hdr < lo || hdr >= hi)
        return -1;
    struct cursor c = {hdr, hi, 0};
    uintptr_t count;
    const uint8_t *table = hdr_table(&c, hdr, &count);
    if (!table || count > (uintptr_t)(hi - c.p) / 8)
        return -1;
    uintptr_t a = 0, b = count;
    while (a < b) {
        uintptr_t mid = a + (b - a) / 2;
        int32_t loc;
        memcpy(&loc, table + 8 * mid, 4);
        if ((uintptr_t)(hdr + loc) <= pc)
            a = mid + 1;
        else
            b = mid;
    }
    if (a == 0)
        return -1;
    int32_t at;
    memcpy(&at, table + 8 * (a - 1) + 4, 4);
    const uint8_t *fde = hdr + at;
    if (fde < lo || fde >= hi)
        return -1;
    struct cursor f = {fde, hi, 0};
    uint64_t len = fixed(&f, 4);
    if (len == 0xffffffff)
        len = fixed(&f, 8);
    if (f.bad || len < 4 || len > (uint64_t)(hi - f.p))
        return -1;
    f.end = f.p + len;
    const uint8_t *id_at = f.p;
    uint32_t id = (uint32_t)fixed(&f, 4);
    if (id == 0 || id > (uintptr_t)(id_at - lo))
        return -1; /* a CIE, or a pointer out of the copy */
    struct cie cie;
    const struct source eh = {0, NULL, 0};
    if (parse_cie(id_at - id, hi, &cie, &eh) != 0)
        return -1;
    uintptr_t begin = encoded(&f, cie.fde_enc, 0);
    uintptr_t range = encoded(&f, cie.fde_enc & PE_FORMAT, 0);
    if (f.bad || pc < begin || pc - begin >= range)
        return -1;
    *start = begin;
    return 0;
}
