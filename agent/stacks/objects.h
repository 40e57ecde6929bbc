/* Loaded objects. */

#ifndef PPROF_AGENT_OBJECTS_H
#define PPROF_AGENT_OBJECTS_H

#include <link.h>
#include <stdint.h>

/* The loaded-objects generation (objects.c): objects_changed() says that
 * objects were loaded or unloaded (the dlclose interposer, the program-
 * header snapshot); readers compare objects_generation() with the value
 * they last rebuilt at. Async-signal-safe. Does not allocate. */
void objects_changed(void);
unsigned objects_generation(void);

/* The address range [*lo, *hi) of the PT_LOAD segments of the loaded object
 * that holds addr; -1 (and 0, 0) when no object holds it. Takes the
 * loader's lock (dladdr, dl_iterate_phdr): set-up paths only. */
int object_range_of(const void *addr, uintptr_t *lo, uintptr_t *hi);

/* The C library's _dl_find_object (glibc 2.35 on: the object containing an
 * address, without the loader lock; async-signal-safe), or NULL when it
 * has none. Set by the constructor (phdr_hooks.c). */
struct dl_find_object;
extern int (*agent_find_object)(void *addr, struct dl_find_object *out);

/* The address range [*lo, *hi) of all of an object's PT_LOAD segments
 * (code and data), from its dl_iterate_phdr entry; *lo > *hi when it has
 * none. Async-signal-safe. Does not allocate. */
static inline void phdr_load_range(const struct dl_phdr_info *info,
                                   uintptr_t *lo, uintptr_t *hi)
{
    *lo = UINTPTR_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (start < *lo)
            *lo = start;
        if (start + ph->p_memsz > *hi)
            *hi = start + ph->p_memsz;
    }
}

/* 1 when a lies in one of the object's PT_LOAD segments (its
 * dl_iterate_phdr entry). Async-signal-safe. */
static inline int phdr_holds(const struct dl_phdr_info *info, uintptr_t a)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && a >= start && a < start + ph->p_memsz)
            return 1;
    }
    return 0;
}

#endif
