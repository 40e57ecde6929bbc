/*
 * symbols_elf.c owns what the symbolizer keeps of an object's ELF file
 * (read through symbols_elf_file.c): its build ID, the executable PT_LOAD
 * segments (to turn runtime addresses into file addresses), and the
 * function table, built from the best symbol table symbols_debug.c found (the object's own .symtab, its separate
 * debug file's, or its MiniDebugInfo's) merged with .dynsym. Files are
 * mapped by libelf (ELF_C_READ_MMAP), so symbol names point into the mapped
 * file and cost no copy.
 *
 * Entered only from the agent's own threads under the symbolizer lock;
 * never from a signal handler. A corrupt or unreadable file must only ever
 * mean fewer names: every libelf result is checked.
 */
#include "agent/symbols/symbols.h"
#include "agent/core/real.h"

#include "agent/core/array.h"
#include "agent/stacks/cfi.h"
#include "agent/host/fds.h"
#include "agent/core/libs.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Records the executable PT_LOAD segments and the build ID. */
static int describe(struct sym_object *o)
{
    size_t nph = 0;
    if (elf_getphdrnum(o->elf, &nph) != 0)
        nph = 0;
    o->segs = real_calloc(nph ? nph : 1, sizeof *o->segs);
    if (!o->segs)
        return -ENOMEM;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(o->elf, (int)i, &ph))
            continue;
        if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
            continue;
        o->segs[o->nsegs++] = (struct sym_segment){
            .vaddr = ph.p_vaddr,
            .memsz = ph.p_memsz,
            .offset = ph.p_offset,
            .filesz = ph.p_filesz,
        };
    }
    real_free(o->build_id);
    o->build_id = symbols_elf_build_id(o->elf);
    if (!o->build_id)
        return -ENOMEM;
    o->has_symbols =
        symbols_elf_has_type(o->elf, SHT_SYMTAB) ||
        symbols_elf_has_type(o->elf, SHT_DYNSYM);
    return 0;
}

int symbols_elf_open(struct sym_object *o, const char *path,
                     const char *alt_path)
{
    o->elf = symbols_elf_open_file(path);
    if (!o->elf && alt_path)
        o->elf = symbols_elf_open_file(alt_path);
    if (!o->elf)
        return -ENOENT;
    return describe(o);
}

int symbols_elf_open_memory(struct sym_object *o, const void *image,
                            size_t size)
{
    if (symbols_elf_init() != 0)
        return -ENOENT;
    /* libelf wants a writable image; the vdso is read-only and tiny. */
    o->image = real_malloc(size);
    if (!o->image)
        return -ENOMEM;
    memcpy(o->image, image, size);
    o->elf = elf_memory(o->image, size);
    if (o->elf && elf_kind(o->elf) != ELF_K_ELF) {
        elf_end(o->elf);
        o->elf = NULL;
    }
    if (!o->elf)
        return -ENOENT;
    return describe(o);
}

int symbols_elf_bias(const struct sym_object *o, uintptr_t start,
                     uintptr_t offset, uintptr_t *bias)
{
    const struct sym_segment *seg = NULL;
    for (size_t i = 0; i < o->nsegs; i++) {
        const struct sym_segment *s = &o->segs[i];
        if (offset >= s->offset && offset < s->offset + s->filesz) {
            seg = s;
            break;
        }
    }
    /* A mapping whose offset no segment covers (odd linkers) still gets the
     * first executable segment rather than no names at all. */
    if (!seg && o->nsegs)
        seg = &o->segs[0];
    if (!seg)
        return -ENOENT;
    *bias = start - offset + (uintptr_t)seg->offset - (uintptr_t)seg->vaddr;
    return 0;
}

static int binding_rank(unsigned char info)
{
    switch (GELF_ST_BIND(info)) {
    case STB_GLOBAL:
        return 0;
    case STB_WEAK:
        return 1;
    default:
        return 2;
    }
}

/* Sorting key for aliases at one address: sized, global, then the name
 * with the fewest leading underscores (qsort rather than __qsort), then the
 * shortest (free rather than its old alias cfree), so the choice is the
 * one a reader expects and stable across runs. */
struct func_tmp {
    struct sym_func f;
    int rank;
};

static int leading_underscores(const char *s)
{
    int n = 0;
    while (s[n] == '_')
        n++;
    return n;
}

static int cmp_func(const void *a, const void *b)
{
    const struct func_tmp *x = a, *y = b;
    if (x->f.addr != y->f.addr)
        return x->f.addr < y->f.addr ? -1 : 1;
    if ((x->f.size == 0) != (y->f.size == 0))
        return x->f.size == 0 ? 1 : -1;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    int ux = leading_underscores(x->f.name), uy = leading_underscores(y->f.name);
    if (ux != uy)
        return ux - uy;
    size_t lx = strlen(x->f.name), ly = strlen(y->f.name);
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return strcmp(x->f.name, y->f.name);
}

struct collection {
    struct func_tmp *v;
    size_t n, cap;
};

static int collect_one(void *ctx, uint64_t value, uint64_t size,
                       unsigned char info, const char *name)
{
    struct collection *c = ctx;
    if (ARRAY_RESERVE(c->v, c->cap, c->n + 1, 1024) != 0)
        return -ENOMEM;
    c->v[c->n++] = (struct func_tmp){
        .f = {value, size, name},
        .rank = binding_rank(info),
    };
    return 0;
}

/* Sorts, keeps one symbol per address, and drops unsized symbols that sit
 * inside a sized function (local labels typed FUNC in assembly), which
 * would otherwise steal the rest of that function. */
static void build_table(struct sym_object *o, struct func_tmp *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_func);
    o->funcs = real_malloc((n ? n : 1) * sizeof *o->funcs);
    if (!o->funcs)
        return;
    size_t out = 0;
    uint64_t covered_to = 0;
    for (size_t i = 0; i < n; i++) {
        if (out && o->funcs[out - 1].addr == v[i].f.addr)
            continue;
        if (v[i].f.size == 0 && v[i].f.addr < covered_to)
            continue;
        o->funcs[out++] = v[i].f;
        if (v[i].f.addr + v[i].f.size > covered_to)
            covered_to = v[i].f.addr + v[i].f.size;
    }
    o->nfuncs = out;
}

void symbols_elf_load(struct sym_object *o)
{
    if (o->loaded)
        return;
    o->loaded = 1;
    if (!o->elf)
        return;

    Elf *full = NULL;
    switch (o->source) {
    case SYM_SOURCE_OWN:
        full = o->elf;
        break;
    case SYM_SOURCE_DEBUG_FILE:
        full = o->debug_elf;
        break;
    case SYM_SOURCE_MINIDEBUG:
        full = o->mini_elf;
        break;
    default:
        break;
    }
    struct collection c = {0};
    int err = 0;
    if (full)
        err = symbols_elf_each_function(full, SHT_SYMTAB, collect_one, &c);
    /* .dynsym is a subset of a full .symtab, but MiniDebugInfo leaves the
     * exported functions out on purpose: merging is cheap and covers both. */
    if (!err)
        err = symbols_elf_each_function(o->elf, SHT_DYNSYM, collect_one, &c);
    if (!err)
        err = symbols_plt_each(o->elf, &o->plt_names, collect_one, &c);
    if (c.n)
        build_table(o, c.v, c.n);
    real_free(c.v);
}

static const struct sym_segment *segment_of(const struct sym_object *o,
                                            uint64_t addr)
{
    for (size_t i = 0; i < o->nsegs; i++)
        if (addr >= o->segs[i].vaddr &&
            addr < o->segs[i].vaddr + o->segs[i].memsz)
            return &o->segs[i];
    return NULL;
}

const struct sym_func *symbols_elf_lookup(const struct sym_object *o,
                                          uint64_t addr)
{
    size_t lo = 0, hi = o->nfuncs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->funcs[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    size_t i = lo - 1;
    const struct sym_func *f = &o->funcs[i];
    if (f->size == 0) {
        /* An unsized symbol runs to the next symbol, but never across the
         * end of its segment (into padding or another section's code). */
        const struct sym_segment *s = segment_of(o, f->addr);
        if (!s || s != segment_of(o, addr))
            return NULL;
        return f;
    }
    /* Nested sized symbols are rare; a short look back finds an enclosing
     * function when addr is past the end of a small inner one. */
    for (size_t k = 0; k < 4; k++) {
        f = &o->funcs[i];
        if (f->size && addr < f->addr + f->size)
            return f;
        if (i == 0)
            break;
        i--;
    }
    return NULL;
}

void symbols_elf_close(struct sym_object *o)
{
    if (o->elf)
        elf_end(o->elf);
    real_free(o->image);
    real_free(o->funcs);
    real_free(o->plt_names);
    real_free(o->segs);
    o->elf = NULL;
    o->image = NULL;
    o->funcs = NULL;
    o->plt_names = NULL;
    o->segs = NULL;
}

void symbols_elf_unload(struct sym_object *o)
{
    symbols_dwarf_close(o);
    symbols_debug_unload(o);
    real_free(o->funcs);
    real_free(o->plt_names);
    o->funcs = NULL;
    o->plt_names = NULL;
    o->nfuncs = 0;
    o->loaded = 0;
}

int symbols_elf_function_start(const struct sym_object *o, uint64_t addr,
                               uint64_t *start)
{
    size_t size = 0, nph = 0;
    const uint8_t *image =
        o->elf ? (const uint8_t *)elf_rawfile(o->elf, &size) : NULL;
    if (!image || elf_getphdrnum(o->elf, &nph) != 0)
        return -ENOENT;
    GElf_Phdr eh, ph;
    size_t i = 0;
    for (; i < nph; i++)
        if (gelf_getphdr(o->elf, (int)i, &eh) && eh.p_type == PT_GNU_EH_FRAME)
            break;
    if (i == nph)
        return -ENOENT;
    /* The segment that loads the header: its descriptions are read where
     * they sit in the file, at the distances they have when loaded. */
    for (i = 0; i < nph; i++)
        if (gelf_getphdr(o->elf, (int)i, &ph) && ph.p_type == PT_LOAD &&
            eh.p_offset >= ph.p_offset &&
            eh.p_offset - ph.p_offset < ph.p_filesz &&
            eh.p_vaddr - ph.p_vaddr == eh.p_offset - ph.p_offset)
            break;
    if (i == nph || ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
        return -ENOENT;
    const uint8_t *hdr = image + eh.p_offset;
    uintptr_t pc = (uintptr_t)hdr + (uintptr_t)(addr - eh.p_vaddr);
    uintptr_t at;
    if (cfi_parse_function_start(hdr, image + ph.p_offset,
                                 image + ph.p_offset + ph.p_filesz, pc,
                                 &at) != 0)
        return -ENOENT;
    *start = eh.p_vaddr + (uint64_t)(at - (uintptr_t)hdr);
    return 0;
}
