/*
 * Where a Go program keeps the running goroutine, for the signal-context
 * walk (stack_signal.c): Go code runs on goroutine stacks that Go
 * allocates in its heap, outside the thread's stack bounds, so the walker
 * has no bounds to check its reads against there. Go's runtime keeps the
 * running goroutine (its g, whose first two words are the bounds of the
 * stack it runs on) in a thread-local word of the executable,
 * runtime.tlsg; this file finds where that word sits from the thread
 * pointer, once a process, when the executable carries Go's build ID note
 * (read in memory: any other program pays a look at its notes).
 *
 * Context: the agent's workers, when a profile or a dump starts (the
 * symbol table is read from the executable's file: never at load, never
 * in a handler). x86-64 only (elsewhere stack_go_g_at stays 0).
 */
#include "agent/core/loader.h"
#include "agent/stacks/stack.h"
#include "agent/symbols/symbols.h"

#include <link.h>
#include <stdint.h>

intptr_t stack_go_g_at;
static int looked;

struct exe {
    void *tls; /* the calling thread's block of the executable's TLS */
    int go; /* it carries Go's build ID note */
};

/* 1 when the note segment [p, p + size) holds Go's build ID (owner "Go",
 * type 4): in memory, no file read, so a program that is not Go pays nothing
 * more. */
static int go_note(const unsigned char *p, size_t size)
{
    size_t at = 0;
    while (at + sizeof(ElfW(Nhdr)) <= size) {
        const ElfW(Nhdr) *n = (const void *)(p + at);
        const char *name = (const char *)(n + 1);
        /* Go's linker writes the name "Go\0\0", 4 bytes. */
        if ((n->n_namesz == 3 || n->n_namesz == 4) && n->n_type == 4 &&
            at + sizeof *n + 3 <= size && name[0] == 'G' && name[1] == 'o' &&
            name[2] == '\0')
            return 1;
        at += sizeof *n + ((n->n_namesz + 3) & ~3u) + ((n->n_descsz + 3) & ~3u);
    }
    return 0;
}

/* The first object is the executable. */
static int first_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct exe *e = data;
    e->tls = info->dlpi_tls_data;
    for (int i = 0; i < info->dlpi_phnum && !e->go; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_NOTE)
            e->go = go_note((const unsigned char *)(info->dlpi_addr +
                                                    ph->p_vaddr),
                            ph->p_memsz);
    }
    return 1;
}

int stack_go_program(void)
{
    struct exe e = {NULL, 0};
    loader_iterate_phdr(first_object, &e);
    return e.go;
}

void stack_go_find(void)
{
#if defined(__x86_64__)
    if (__atomic_exchange_n(&looked, 1, __ATOMIC_ACQ_REL))
        return;
    struct exe e = {NULL, 0};
    loader_iterate_phdr(first_object, &e);
    uint64_t value;
    if (!e.go || !e.tls ||
        symbols_elf_tls_symbol("/proc/self/exe", "runtime.tlsg", &value) != 0)
        return;
    uintptr_t tp; /* glibc's thread control block points to itself */
    __asm__ volatile("movq %%fs:0, %0" : "=r"(tp));
    __atomic_store_n(&stack_go_g_at,
                     (intptr_t)((uintptr_t)e.tls + value - tp),
                     __ATOMIC_RELEASE);
#endif
}
