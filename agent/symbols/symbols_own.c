/*
 * Which loaded objects are there only for the agent: the agent itself and
 * the libraries it needs (libdw, which it opens itself, libelf and what
 * they need) that the
 * program does not need itself. The index lists the objects whose
 * functions profiles cannot name, to tell a user what to install; the
 * agent's own libraries are none of the program's business.
 *
 * From the loader's list (dl_iterate_phdr) and each object's DT_NEEDED
 * entries, read from its loaded dynamic section: a library named there is
 * the loaded object of that file name (the loader's name for it is the
 * path it found, ending in the name asked for). What the main executable
 * needs, directly or not, is the program's; what only the agent needs,
 * directly or not, is the agent's. Objects the program opened later with
 * dlopen are the program's too.
 *
 * Runs on the agent's own threads (the index), never in a signal handler
 * and never inside an interposed call; it takes the loader's lock (through
 * dl_iterate_phdr). Not async-signal-safe.
 */
#include "agent/symbols/symbols.h"
#include "agent/core/libs.h"
#include "agent/core/loader.h"
#include "agent/core/real.h"

#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define OWN_MAX_OBJECTS 512
#define OWN_MAX_NEEDED 64

struct loaded {
    const char *name; /* the loader's; "" for the main executable */
    uintptr_t lo, hi; /* the object's loaded range */
    const char *needed[OWN_MAX_NEEDED];
    size_t nneeded;
};

struct list {
    struct loaded *o;
    size_t n;
};

static int collect(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct list *l = data;
    if (l->n == OWN_MAX_OBJECTS)
        return 1;
    struct loaded *o = &l->o[l->n++];
    memset(o, 0, sizeof *o);
    o->name = info->dlpi_name ? info->dlpi_name : "";
    o->lo = UINTPTR_MAX;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < o->lo)
            o->lo = a;
        if (a + ph->p_memsz > o->hi)
            o->hi = a + ph->p_memsz;
    }
    /* The kernel's [vdso] needs nothing, and its dynamic section is not
     * relocated. */
    if (!dyn || strncmp(o->name, "linux-vdso", 10) == 0)
        return 0;
    const char *strtab = NULL;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB)
            strtab = (const char *)d->d_un.d_ptr;
    /* glibc relocates the entry where the section is writable; where it
     * is not, it is still the file's. */
    if (strtab && ((uintptr_t)strtab < o->lo || (uintptr_t)strtab >= o->hi))
        strtab += info->dlpi_addr;
    if (!strtab || (uintptr_t)strtab < o->lo || (uintptr_t)strtab >= o->hi)
        return 0;
    for (const ElfW(Dyn) *d = dyn;
         d->d_tag != DT_NULL && o->nneeded < OWN_MAX_NEEDED; d++)
        if (d->d_tag == DT_NEEDED)
            o->needed[o->nneeded++] = strtab + d->d_un.d_val;
    return 0;
}

/* The loaded object whose file name is soname, or -1. */
static int find(const struct list *l, const char *soname)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *slash = strrchr(l->o[i].name, '/');
        if (strcmp(slash ? slash + 1 : l->o[i].name, soname) == 0)
            return (int)i;
    }
    return -1;
}

/* Marks with bit everything object i needs, directly or not. */
static void mark(const struct list *l, unsigned char *marks, int i,
                 unsigned char bit)
{
    if (i < 0 || (marks[i] & bit))
        return;
    marks[i] |= bit;
    for (size_t k = 0; k < l->o[i].nneeded; k++)
        mark(l, marks, find(l, l->o[i].needed[k]), bit);
}

size_t symbols_agent_only(struct sym_file_id *out, size_t max)
{
    struct list l = {real_calloc(OWN_MAX_OBJECTS, sizeof *l.o), 0};
    unsigned char *marks = real_calloc(OWN_MAX_OBJECTS, 1);
    size_t n = 0;
    if (!l.o || !marks)
        goto out;
    loader_iterate_phdr(collect, &l);
    uintptr_t self = (uintptr_t)&symbols_agent_only;
    mark(&l, marks, 0, 2); /* the main executable comes first */
    for (size_t i = 0; i < l.n; i++)
        if (self >= l.o[i].lo && self < l.o[i].hi)
            mark(&l, marks, (int)i, 1);
    /* The agent opens libdw itself (libs.c), so no DT_NEEDED names it:
     * it and what it needs are the agent's unless the program needs them
     * too. */
    mark(&l, marks, find(&l, LIBS_SONAME), 1);
    /* Objects neither needs were opened later: the program's. */
    for (size_t i = 0; i < l.n && n < max; i++) {
        struct stat st;
        if (marks[i] != 1 || stat(l.o[i].name, &st) != 0)
            continue;
        /* As the maps write it (maps.c): major, then minor. */
        out[n++] = (struct sym_file_id){
            ((uint64_t)major(st.st_dev) << 32) | minor(st.st_dev),
            (uint64_t)st.st_ino};
    }
out:
    real_free(l.o);
    real_free(marks);
    return n;
}
