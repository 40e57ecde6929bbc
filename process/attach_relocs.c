/*
 * The loaded objects' relocations of the doors (attach_doors.c), pointed
 * at the agent after an attach and put back at the detach
 * (docs/attach.md). Preloaded, the agent is first in the lookup and the
 * loader binds the host's calls to it; loaded by dlopen, the host's calls
 * were bound to the C library before it came. This file rewrites the
 * GOT entries the loader wrote: every R_X86_64_JUMP_SLOT and
 * R_X86_64_GLOB_DAT of DT_JMPREL and DT_RELA whose symbol is a door.
 *
 * An entry is rewritten only when it leads to the C library's function
 * the door forwards to: already bound to it, or not bound yet (lazy
 * binding: the entry still leads into the object's own PLT) and the
 * loader would bind it there for the version the object asks for. So an
 * object that defines malloc itself, or binds another allocator's, or an
 * old pthread_cond_wait@GLIBC_2.2.5, is left as it is. The agent's own
 * object, the C library (its internal calls) and the loader are never
 * touched.
 *
 * A round has three steps, so that no lookup of the loader runs inside
 * dl_iterate_phdr (it holds the loader's write lock; dlsym takes the
 * other lock, the order dlopen takes them in the opposite way): the
 * entries are collected under dl_iterate_phdr, the lazy ones are looked
 * up outside it, and the writes are made under it again, where no
 * dlclose can unmap an object being written. A page the loader made
 * read-only (RELRO, or a segment without write) is made writable for
 * the one store and given its protection back at once. A round touches
 * only the objects loaded when it began, once the loader's lock was
 * taken and left (a load under way then has ended: its relocation and
 * RELRO are done); an object unloaded during it makes it write nothing.
 * The starter's bind is the first round; the rescanner's (objects the
 * host loaded since, attach_rescan.c) add to it, each entry kept once.
 *
 * Entered on the starter of an attached agent (bind), on the rescanner
 * and on the detacher (unbind), with the guard entered; never in signal
 * context. The host's
 * threads read the entries meanwhile: each is one aligned 8-byte store,
 * so a call goes to the C library or to the agent, never elsewhere. A
 * lazy entry the loader's resolver is binding at that very moment may
 * get the C library's address after ours: that entry is then not
 * recorded, and the detach, finding it no longer leads to the agent,
 * leaves it.
 */
#include "process/process.h"

#include "agent/stacks/cfi.h"
#include "agent/stacks/objects.h"
#include "agent/core/loader.h"
#include "agent/log.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#pragma weak dlvsym

enum { ENTRY_NEW, ENTRY_LEFT, ENTRY_TAKEN, ENTRY_BOUND };

/* One relocation of a door: collected (new), left as it is or taken (to
 * be rewritten), bound (rewritten: what the detach puts back). */
struct entry {
    uintptr_t slot; /* the GOT entry */
    uintptr_t old;  /* what it held before */
    uintptr_t base; /* the object's load address */
    short door;
    char lazy;      /* not bound by the loader yet */
    char state;
    char version[24]; /* the version the object asks for, lazy only */
};
#define ENTRIES_MAX 2048
/* Written on the starter (bind), the rescanner (attach_rescan.c) and
 * the detacher (unbind), which never run at once: the rescanner starts
 * after the starter's bind, and the detacher waits for the starter and
 * ends the rescanner first. */
static struct entry entries[ENTRIES_MAX];
static int nentries;
static uintptr_t self_base;

/* An object's dynamic tables, the ones the relocations name. */
struct dyn_tables {
    const ElfW(Sym) *symtab;
    const char *strtab;
    const ElfW(Half) *versym;
    const ElfW(Verneed) *verneed;
    size_t verneednum;
    const ElfW(Rela) *rel[2];
    size_t relsz[2];
};

static uintptr_t dyn_ptr(uintptr_t base, uintptr_t p)
{
    /* The loader relocates most d_ptr values in place; the vDSO's are
     * left as link-time addresses. */
    return p < base ? base + p : p;
}

static void read_dyn(uintptr_t base, const ElfW(Dyn) *d, struct dyn_tables *t)
{
    memset(t, 0, sizeof *t);
    for (; d->d_tag != DT_NULL; d++) {
        const void *p = (const void *)dyn_ptr(base, d->d_un.d_ptr);
        switch (d->d_tag) {
        case DT_SYMTAB: t->symtab = p; break;
        case DT_STRTAB: t->strtab = p; break;
        case DT_VERSYM: t->versym = p; break;
        case DT_VERNEED: t->verneed = p; break;
        case DT_VERNEEDNUM: t->verneednum = d->d_un.d_val; break;
        case DT_JMPREL: t->rel[0] = p; break;
        case DT_PLTRELSZ: t->relsz[0] = d->d_un.d_val; break;
        case DT_RELA: t->rel[1] = p; break;
        case DT_RELASZ: t->relsz[1] = d->d_un.d_val; break;
        default: break;
        }
    }
}

/* The version name symbol sym asks for, "" when none. */
static const char *version_of(const struct dyn_tables *t, size_t sym)
{
    if (!t->versym || !t->verneed)
        return "";
    ElfW(Half) ndx = t->versym[sym] & 0x7fff;
    const ElfW(Verneed) *v = t->verneed;
    for (size_t k = 0; ndx > 1 && k < t->verneednum; k++) {
        const ElfW(Vernaux) *a =
            (const ElfW(Vernaux) *)((const char *)v + v->vn_aux);
        for (size_t j = 0; j < v->vn_cnt; j++) {
            if (a->vna_other == ndx)
                return t->strtab + a->vna_name;
            a = (const ElfW(Vernaux) *)((const char *)a + a->vna_next);
        }
        v = (const ElfW(Verneed) *)((const char *)v + v->vn_next);
    }
    return "";
}

/* 1 for the objects never rewritten: the agent, the C library, the
 * loader, the vDSO, and objects without a dynamic section. */
static int left_alone(const struct dl_phdr_info *info, const ElfW(Dyn) *dyn)
{
    if (!dyn || info->dlpi_addr == self_base)
        return 1;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *b = strrchr(name, '/');
    b = b ? b + 1 : name;
    return strncmp(b, "libc.so.", 8) == 0 || strncmp(b, "ld-linux", 8) == 0 ||
           strncmp(b, "linux-vdso", 10) == 0 || strncmp(b, "ld.so", 5) == 0;
}

static const ElfW(Dyn) *dynamic_of(const struct dl_phdr_info *info)
{
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            return (const ElfW(Dyn) *)(info->dlpi_addr +
                                       info->dlpi_phdr[i].p_vaddr);
    return NULL;
}

/* Where relocation slot, holding now, is noted: a new entry, or the one
 * of an earlier round when the slot changed since (its object was loaded
 * again where it was); NULL when nothing changed or no room is left. */
static struct entry *entry_for(uintptr_t slot, uintptr_t now)
{
    for (int i = 0; i < nentries; i++) {
        struct entry *e = &entries[i];
        if (e->slot != slot)
            continue;
        int same = e->state == ENTRY_BOUND
                       ? now == attach_door(e->door)->agent
                       : now == e->old;
        return same ? NULL : e;
    }
    return nentries < ENTRIES_MAX ? &entries[nentries++] : NULL;
}

/* Notes relocation r of an object when it names a door and leads to the
 * C library's function, or may (lazy). */
static void collect_one(const struct dl_phdr_info *info,
                        const struct dyn_tables *t, const ElfW(Rela) *r)
{
    unsigned type = ELF64_R_TYPE(r->r_info);
    size_t sym = ELF64_R_SYM(r->r_info);
    if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !sym)
        return;
    int door = attach_door_find(t->strtab + t->symtab[sym].st_name);
    if (door < 0)
        return;
    uintptr_t slot = info->dlpi_addr + r->r_offset;
    uintptr_t now = __atomic_load_n((uintptr_t *)slot, __ATOMIC_RELAXED);
    int lazy = now != attach_door(door)->real;
    if (lazy && (type != R_X86_64_JUMP_SLOT || !phdr_holds(info, now)))
        return;
    struct entry *e = entry_for(slot, now);
    if (!e)
        return;
    *e = (struct entry){slot, now, info->dlpi_addr, (short)door,
                        (char)lazy, ENTRY_NEW, ""};
    if (lazy)
        strncpy(e->version, version_of(t, sym), sizeof e->version - 1);
}

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)arg;
    if (attach_round_cut(info, size))
        return 1;
    const ElfW(Dyn) *dyn = dynamic_of(info);
    if (!attach_round_holds(info->dlpi_addr) || left_alone(info, dyn))
        return 0;
    struct dyn_tables t;
    read_dyn(info->dlpi_addr, dyn, &t);
    if (!t.symtab || !t.strtab)
        return 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; t.rel[k] && i < t.relsz[k] / sizeof *t.rel[k]; i++)
            collect_one(info, &t, &t.rel[k][i]);
    return 0;
}

/* Outside dl_iterate_phdr: which entries are taken. A lazy one is taken
 * when the loader would bind it to the door's C-library function. */
static void decide(void)
{
    for (int i = 0; i < nentries; i++) {
        struct entry *e = &entries[i];
        if (e->state != ENTRY_NEW)
            continue;
        const struct attach_door *d = attach_door(e->door);
        void *to = (void *)d->real;
        if (e->lazy && e->version[0] && dlvsym) {
            loader_gate_enter();
            to = dlvsym(RTLD_DEFAULT, d->name, e->version);
            loader_gate_leave();
        } else if (e->lazy) {
            to = loader_sym(RTLD_DEFAULT, d->name);
        }
        e->state = (uintptr_t)to == d->real ? ENTRY_TAKEN : ENTRY_LEFT;
    }
}

/* The protection the loader left on slot's page: its segment's, without
 * write inside RELRO; -1 when no segment holds it. */
static int page_prot(const struct dl_phdr_info *info, uintptr_t slot,
                     uintptr_t page_mask)
{
    int prot = -1, relro = 0;
    uintptr_t page = slot & page_mask;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (ph->p_type == PT_LOAD && slot >= lo && slot < hi)
            prot = (ph->p_flags & PF_R ? PROT_READ : 0) |
                   (ph->p_flags & PF_W ? PROT_WRITE : 0) |
                   (ph->p_flags & PF_X ? PROT_EXEC : 0);
        /* The loader protects whole pages: the last partial one stays
         * writable (glibc's _dl_protect_relro). */
        if (ph->p_type == PT_GNU_RELRO && page >= (lo & page_mask) &&
            page < (hi & page_mask))
            relro = 1;
    }
    return prot >= 0 && relro ? prot & ~PROT_WRITE : prot;
}

/* Stores value in the GOT entry slot of the object info describes, the
 * page writable only for the store. Returns 0 or -errno. */
static int store(const struct dl_phdr_info *info, uintptr_t slot,
                 uintptr_t value)
{
    uintptr_t mask = ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
    int prot = page_prot(info, slot, mask);
    if (prot < 0)
        return -EFAULT;
    if (prot & PROT_WRITE) {
        __atomic_store_n((uintptr_t *)slot, value, __ATOMIC_RELEASE);
        return 0;
    }
    void *page = (void *)(slot & mask);
    size_t len = (size_t)~mask + 1;
    if (mprotect(page, len, prot | PROT_WRITE) != 0)
        return -errno;
    __atomic_store_n((uintptr_t *)slot, value, __ATOMIC_RELEASE);
    mprotect(page, len, prot);
    return 0;
}

/* Under dl_iterate_phdr: each object's taken entries (bind, arg 1) or
 * bound ones (unbind, arg 0) written, when the entry still holds what
 * the step expects. */
static int rewrite(struct dl_phdr_info *info, size_t size, void *arg)
{
    int binding = arg != NULL;
    if (binding && attach_round_cut(info, size))
        return 1;
    if (binding && !attach_round_holds(info->dlpi_addr))
        return 0;
    for (int i = 0; i < nentries; i++) {
        struct entry *e = &entries[i];
        if (e->base != info->dlpi_addr || !phdr_holds(info, e->slot) ||
            e->state != (binding ? ENTRY_TAKEN : ENTRY_BOUND))
            continue;
        uintptr_t agent = attach_door(e->door)->agent;
        uintptr_t want = binding ? e->old : agent;
        if (__atomic_load_n((uintptr_t *)e->slot, __ATOMIC_ACQUIRE) != want)
            continue;
        if (store(info, e->slot, binding ? agent : e->old) == 0)
            e->state = binding ? ENTRY_BOUND : ENTRY_LEFT;
    }
    return 0;
}

static int count(int state)
{
    int n = 0;
    for (int i = 0; i < nentries; i++)
        n += entries[i].state == state;
    return n;
}

/* Before a round: the entries of objects no longer loaded dropped, and
 * those taken but not written (a round cut short) decided again. */
static void entries_renew(void)
{
    int kept = 0;
    for (int i = 0; i < nentries; i++) {
        struct entry *e = &entries[i];
        if (attach_round_gone(e->base))
            continue;
        if (e->state == ENTRY_TAKEN)
            e->state = ENTRY_NEW;
        entries[kept++] = *e;
    }
    nentries = kept;
}

/* The loader's count of objects added when the last round began that
 * ran to its end (~0 before any). */
static unsigned long long done_adds = ~0ULL;

/* One round: the relocations of the objects loaded now that lead to the
 * C library pointed at the agent. Returns how many were rewritten, or
 * -EAGAIN when an object was unloaded during it. */
static int rebind(void)
{
    unsigned long long adds = attach_round_begin();
    entries_renew();
    int before = count(ENTRY_BOUND);
    loader_iterate_phdr(collect, NULL);
    decide();
    loader_iterate_phdr(rewrite, (void *)1);
    /* Unloaded meanwhile: the next round does it again. */
    if (attach_round_cut(NULL, 0))
        return -EAGAIN;
    done_adds = adds;
    return count(ENTRY_BOUND) - before;
}

int attach_relocs_rescan(void)
{
    unsigned long long v[2] = {0, 0};
    loader_iterate_phdr(cfi_phdr_counters, v);
    if (v[0] == done_adds)
        return 0;
    int n = rebind();
    if (n > 0)
        log_info("attach: %d more relocations point to the agent, in objects "
                 "loaded since the attach",
                 n);
    return n;
}

int attach_relocs_bind(void)
{
    Dl_info info;
    if (attach_doors_init() != 0 ||
        !loader_addr((const void *)attach_relocs_bind, &info))
        return -ENOENT;
    self_base = (uintptr_t)info.dli_fbase;
    nentries = 0;
    done_adds = ~0ULL;
    int n = -EAGAIN;
    for (int tries = 0; n == -EAGAIN && tries < 5; tries++)
        n = rebind();
    log_info("attach: %d of %d relocations of the malloc, lock and thread "
             "functions point to the agent now",
             n, nentries);
    return n;
}

int attach_relocs_unbind(void)
{
    int before = count(ENTRY_BOUND);
    loader_iterate_phdr(rewrite, NULL);
    int left = count(ENTRY_BOUND);
    nentries = 0;
    return before - left;
}
