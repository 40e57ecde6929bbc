/*
 * The address of a shared object's dynamic symbol in a target: the
 * symbol's value from the file's .dynsym, plus where the target mapped
 * the file. Reads the file named as the target sees it, through
 * /proc/PID/root (the caller's job), so that a target in another mount
 * namespace is read from its own files. Never writes anything.
 */
#include "attach/attach.h"

#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The loadable segment that holds file offset off. */
static const Elf64_Phdr *segment_of(const Elf64_Ehdr *eh, size_t len,
                                    uint64_t off)
{
    if (eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > len)
        return NULL;
    const Elf64_Phdr *ph = (const void *)((const char *)eh + eh->e_phoff);
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD &&
            off >= (ph[i].p_offset & ~(page - 1)) &&
            off < ph[i].p_offset + ph[i].p_filesz)
            return &ph[i];
    return NULL;
}

static int find_dynsym(const char *base, size_t len, const char *name,
                       uint64_t *value)
{
    const Elf64_Ehdr *eh = (const void *)base;
    if (eh->e_shoff == 0 ||
        eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > len)
        return -1;
    const Elf64_Shdr *sh = (const void *)(base + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum)
            continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        if (sh[i].sh_offset + sh[i].sh_size > len ||
            str->sh_offset + str->sh_size > len)
            return -1;
        const Elf64_Sym *sym = (const void *)(base + sh[i].sh_offset);
        size_t n = sh[i].sh_size / sizeof *sym;
        for (size_t k = 0; k < n; k++) {
            if (sym[k].st_shndx == SHN_UNDEF || sym[k].st_value == 0 ||
                sym[k].st_name >= str->sh_size)
                continue;
            const char *s = base + str->sh_offset + sym[k].st_name;
            if (strncmp(s, name, str->sh_size - sym[k].st_name) == 0 &&
                strlen(s) == strlen(name)) {
                *value = sym[k].st_value;
                return 0;
            }
        }
    }
    return -1;
}

int elf_symbol_address(const char *path, const struct mapping *m,
                       const char *name, uintptr_t *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        return -1;
    }
    size_t len = (size_t)st.st_size;
    char *base = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED)
        return -1;
    const Elf64_Ehdr *eh = (const void *)base;
    int err = -1;
    uint64_t value;
    const Elf64_Phdr *load;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
        eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_type == ET_DYN &&
        (load = segment_of(eh, len, m->offset)) != NULL &&
        find_dynsym(base, len, name, &value) == 0) {
        /* File offset m->offset is at m->start; in the segment, at
         * p_vaddr + (offset - p_offset) from the load bias. */
        uintptr_t bias = m->start - (uintptr_t)(load->p_vaddr + m->offset -
                                                load->p_offset);
        *out = bias + (uintptr_t)value;
        err = 0;
    }
    munmap(base, len);
    return err;
}
