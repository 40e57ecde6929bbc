/*
 * Names for the procedure linkage table: each stub of .plt, .plt.sec and
 * .plt.got becomes a function "<target>@plt" of its own size, as perf and
 * gdb name them. Without them, a sample that lands in a stub took the name
 * of the last symbol before the table (an unsized _init, which runs to the
 * next symbol in the same segment): libpython's calls through its PLT
 * showed as `_init`.
 *
 * A stub is matched to its target by the slot it jumps through: an
 * indirect `jmp *slot(%rip)` (ff 25 rel32, after an endbr64 or a bnd
 * prefix when there is one), and the dynamic relocation (.rela.plt or
 * .rela.dyn) that fills that slot names the symbol. The first entry of a
 * lazy .plt (the resolver's), and the lazy entries of an IBT .plt (a push
 * and a jump to it), jump through no relocated slot and stay unnamed.
 * x86-64 only: elsewhere there are no stub names.
 *
 * Entered from the agent's own threads under the symbolizer lock, like the
 * rest of symbols_elf.c; a corrupt file means fewer names, never a fault.
 */
#include "agent/core/array.h"
#include "agent/symbols/symbols.h"
#include "agent/core/libs.h"
#include "agent/core/real.h"

#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

struct slot_sym {
    uint64_t slot; /* the relocated address */
    const char *name;
};

static int by_slot(const void *a, const void *b)
{
    uint64_t x = ((const struct slot_sym *)a)->slot;
    uint64_t y = ((const struct slot_sym *)b)->slot;
    return x < y ? -1 : x > y;
}

/* Every RELA entry against .dynsym that names a symbol, sorted by slot. */
static struct slot_sym *relocated_slots(Elf *elf, size_t *n)
{
    struct slot_sym *v = NULL;
    size_t cap = 0;
    *n = 0;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh, link;
        Elf_Scn *dynsym;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
            sh.sh_entsize == 0 || !(dynsym = elf_getscn(elf, sh.sh_link)) ||
            !gelf_getshdr(dynsym, &link) || link.sh_type != SHT_DYNSYM)
            continue;
        Elf_Data *rd = elf_getdata(scn, NULL);
        Elf_Data *sd = elf_getdata(dynsym, NULL);
        if (!rd || !sd)
            continue;
        size_t count = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; i < count; i++) {
            GElf_Rela r;
            GElf_Sym sym;
            if (!gelf_getrela(rd, (int)i, &r))
                break;
            size_t si = GELF_R_SYM(r.r_info);
            if (si == 0 || !gelf_getsym(sd, (int)si, &sym))
                continue;
            const char *name = elf_strptr(elf, link.sh_link, sym.st_name);
            if (!name || !*name)
                continue;
            if (ARRAY_RESERVE(v, cap, *n + 1, 256) != 0)
                break;
            v[(*n)++] = (struct slot_sym){r.r_offset, name};
        }
    }
    if (*n)
        qsort(v, *n, sizeof *v, by_slot);
    return v;
}

static const char *slot_name(const struct slot_sym *v, size_t n,
                             uint64_t slot)
{
    struct slot_sym key = {slot, NULL};
    const struct slot_sym *s = bsearch(&key, v, n, sizeof *v, by_slot);
    return s ? s->name : NULL;
}

/* The slot an entry of `size` bytes at addr jumps through, or 0. */
static uint64_t entry_slot(const unsigned char *p, size_t size, uint64_t addr)
{
    for (size_t j = 0; j + 6 <= size; j++) {
        if (p[j] != 0xff || p[j + 1] != 0x25)
            continue;
        int32_t rel;
        memcpy(&rel, p + j + 2, sizeof rel);
        return addr + j + 6 + (uint64_t)(int64_t)rel;
    }
    return 0;
}

struct stub {
    uint64_t addr, size;
    const char *target;
};

int symbols_plt_each(Elf *elf, char **names,
                     int (*fn)(void *ctx, uint64_t value, uint64_t size,
                               unsigned char info, const char *name),
                     void *ctx)
{
    *names = NULL;
#if defined(__x86_64__)
    static const char *const tables[] = {".plt", ".plt.sec", ".plt.got"};
    size_t nslots;
    struct slot_sym *slots = relocated_slots(elf, &nslots);
    struct stub *stubs = NULL;
    size_t nstubs = 0, cap = 0, bytes = 0;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0] && nslots; t++) {
        Elf_Scn *scn = symbols_elf_section(elf, tables[t]);
        GElf_Shdr sh;
        Elf_Data *d;
        if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
            !(d = elf_getdata(scn, NULL)) || !d->d_buf)
            continue;
        size_t ent = sh.sh_entsize == 8 ? 8 : 16;
        size_t have = d->d_size < sh.sh_size ? d->d_size : sh.sh_size;
        for (size_t off = 0; off + ent <= have; off += ent) {
            uint64_t addr = sh.sh_addr + off;
            const char *target = slot_name(
                slots, nslots,
                entry_slot((const unsigned char *)d->d_buf + off, ent, addr));
            if (!target || ARRAY_RESERVE(stubs, cap, nstubs + 1, 64) != 0)
                continue;
            stubs[nstubs++] = (struct stub){addr, ent, target};
            bytes += strlen(target) + sizeof "@plt";
        }
    }
    int r = 0;
    char *block = nstubs ? real_malloc(bytes) : NULL;
    if (block) {
        char *at = block;
        for (size_t i = 0; i < nstubs && r == 0; i++) {
            size_t len = strlen(stubs[i].target);
            memcpy(at, stubs[i].target, len);
            memcpy(at + len, "@plt", sizeof "@plt");
            r = fn(ctx, stubs[i].addr, stubs[i].size,
                   GELF_ST_INFO(STB_GLOBAL, STT_FUNC), at);
            at += len + sizeof "@plt";
        }
        *names = block;
    }
    real_free(stubs);
    real_free(slots);
    return r;
#else
    (void)elf, (void)fn, (void)ctx;
    return 0;
#endif
}
