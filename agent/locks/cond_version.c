/*
 * Which pthread_cond_wait/timedwait version an object binds: glibc keeps
 * the old GLIBC_2.2.5 condition variables beside the current ones, and the
 * interposers in lock_hooks.c must forward a caller to the one it was
 * linked against. Read from the object's dynamic section: its relocations
 * against pthread_cond_* and the version (DT_VERNEED) each names. Results
 * are cached per object (COND_OBJECTS, emptied when full: objects come and
 * go with dlclose).
 *
 * Entered from the condition-variable interposers on any host thread,
 * possibly holding the condition's mutex; never from a signal handler.
 */
#include "agent/locks/contention.h"
#include "agent/core/loader.h"

#include "agent/guard.h"
#include "agent/stacks/objects.h"
#include "agent/spinlock.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

struct cond_object {
    uintptr_t lo, hi;
    int old;
};
#define COND_OBJECTS 32
static struct cond_object cond_objects[COND_OBJECTS];
static int cond_nobjects;
static spinlock_t cond_objects_lock;

struct cond_query {
    uintptr_t pc;
    int found;
    struct cond_object obj;
};

static uintptr_t dyn_ptr(uintptr_t base, uintptr_t p)
{
    /* The loader relocates most d_ptr values in place; the vdso's are left
     * as link-time addresses. */
    return p < base ? base + p : p;
}

static int rela_wants_old(const ElfW(Rela) *rela, size_t n,
                          const ElfW(Sym) *symtab, const char *strtab,
                          const ElfW(Half) *versym, const ElfW(Verneed) *vn,
                          size_t vnnum)
{
    for (size_t i = 0; i < n; i++) {
        size_t sym = ELF64_R_SYM(rela[i].r_info);
        if (sym == 0)
            continue;
        const char *name = strtab + symtab[sym].st_name;
        if (strcmp(name, "pthread_cond_wait") != 0 &&
            strcmp(name, "pthread_cond_timedwait") != 0)
            continue;
        ElfW(Half) ndx = versym[sym] & 0x7fff;
        const ElfW(Verneed) *v = vn;
        for (size_t k = 0; v && k < vnnum; k++) {
            const ElfW(Vernaux) *a =
                (const ElfW(Vernaux) *)((const char *)v + v->vn_aux);
            for (size_t j = 0; j < v->vn_cnt; j++) {
                if (a->vna_other == ndx)
                    return strcmp(strtab + a->vna_name, "GLIBC_2.2.5") == 0;
                a = (const ElfW(Vernaux) *)((const char *)a + a->vna_next);
            }
            if (!v->vn_next)
                break;
            v = (const ElfW(Verneed) *)((const char *)v + v->vn_next);
        }
        return 0;
    }
    return 0;
}

/* 1 when the object loaded at base, with dynamic section dyn, binds
 * pthread_cond_* at GLIBC_2.2.5. */
static int object_wants_old(uintptr_t base, const ElfW(Dyn) *dyn)
{
    if (!dyn)
        return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Half) *versym = NULL;
    const ElfW(Verneed) *vn = NULL;
    size_t vnnum = 0;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t jmprelsz = 0, relasz = 0;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = (void *)dyn_ptr(base, d->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (void *)dyn_ptr(base, d->d_un.d_ptr); break;
        case DT_VERSYM: versym = (void *)dyn_ptr(base, d->d_un.d_ptr); break;
        case DT_VERNEED: vn = (void *)dyn_ptr(base, d->d_un.d_ptr); break;
        case DT_VERNEEDNUM: vnnum = d->d_un.d_val; break;
        case DT_JMPREL: jmprel = (void *)dyn_ptr(base, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: jmprelsz = d->d_un.d_val; break;
        case DT_RELA: rela = (void *)dyn_ptr(base, d->d_un.d_ptr); break;
        case DT_RELASZ: relasz = d->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab || !versym || !vn)
        return 0;
    return (jmprel && rela_wants_old(jmprel, jmprelsz / sizeof *jmprel,
                                     symtab, strtab, versym, vn, vnnum)) ||
           (rela && rela_wants_old(rela, relasz / sizeof *rela, symtab,
                                   strtab, versym, vn, vnnum));
}

static int find_cond_object(struct dl_phdr_info *info, size_t size, void *p)
{
    (void)size;
    struct cond_query *q = p;
    uintptr_t base = info->dlpi_addr, lo, hi;
    phdr_load_range(info, &lo, &hi);
    if (q->pc < lo || q->pc >= hi)
        return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
    }
    q->found = 1;
    q->obj.lo = lo;
    q->obj.hi = hi;
    q->obj.old = object_wants_old(base, dyn);
    return 1;
}

int cond_version_old(uintptr_t pc)
{
    spin_lock(&cond_objects_lock);
    for (int i = 0; i < cond_nobjects; i++) {
        if (pc >= cond_objects[i].lo && pc < cond_objects[i].hi) {
            int old = cond_objects[i].old;
            spin_unlock(&cond_objects_lock);
            return old;
        }
    }
    spin_unlock(&cond_objects_lock);
    /* The caller may hold the condition's mutex, and that mutex may be
     * one its allocator takes: the C library's lock-free lookup when it
     * has one. Otherwise dl_iterate_phdr, which takes the loader's write
     * lock, held briefly by dlopen and dlclose (the latter frees memory
     * meanwhile). */
    struct cond_query q = {.pc = pc};
    struct dl_find_object fo;
    if (agent_find_object && agent_find_object((void *)pc, &fo) == 0 &&
        fo.dlfo_link_map) {
        q.found = 1;
        q.obj.lo = (uintptr_t)fo.dlfo_map_start;
        q.obj.hi = (uintptr_t)fo.dlfo_map_end;
        q.obj.old = object_wants_old(fo.dlfo_link_map->l_addr,
                                     fo.dlfo_link_map->l_ld);
    } else {
        guard_enter();
        loader_iterate_phdr(find_cond_object, &q);
        guard_leave();
    }
    if (!q.found)
        return 0;
    spin_lock(&cond_objects_lock);
    if (cond_nobjects < COND_OBJECTS)
        cond_objects[cond_nobjects++] = q.obj;
    else /* full: objects come and go (dlclose); start over */
        cond_nobjects = 0;
    spin_unlock(&cond_objects_lock);
    return q.obj.old;
}
