/*
 * symbols_elf_file.c reads ELF files for the rest of the symbolizer: opens
 * one through a libelf mmap, and finds in it the GNU build ID, a section by
 * name or type, and the function symbols of a symbol table (and, for the
 * stack walker's Go stacks, one thread-local symbol). It calls
 * nothing of the symbolizer's own, so that symbols_elf.c (the objects and
 * their function tables), symbols_debug.c (the debug-file search) and
 * symbols_plt.c (the stubs' names) stand on it without calling each other
 * in a circle.
 *
 * Entered only from the agent's own threads under the symbolizer lock;
 * never from a signal handler. A corrupt or unreadable file must only ever
 * mean fewer names: every libelf result is checked.
 */
#include "agent/symbols/symbols.h"
#include "agent/core/real.h"

#include "agent/host/fds.h"
#include "agent/core/libs.h"

#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int symbols_elf_init(void)
{
    return libs_load();
}

/* Opens an ELF file through a libelf mmap and closes the descriptor: the
 * mapping keeps the data, and hundreds of libraries must not cost hundreds
 * of descriptors. */
Elf *symbols_elf_open_file(const char *path)
{
    if (symbols_elf_init() != 0)
        return NULL;
    int fd = fds_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (elf && elf_kind(elf) != ELF_K_ELF) {
        elf_end(elf);
        elf = NULL;
    }
    if (elf)
        elf_cntl(elf, ELF_C_FDDONE);
    fds_close(fd);
    return elf;
}

static char *hex(const unsigned char *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    char *s = real_malloc(2 * n + 1);
    if (!s)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        s[2 * i] = digits[p[i] >> 4];
        s[2 * i + 1] = digits[p[i] & 15];
    }
    s[2 * n] = '\0';
    return s;
}

char *symbols_elf_build_id(Elf *elf)
{
    const void *id = NULL;
    ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    if (n <= 0 || !id)
        return strdup("");
    return hex(id, (size_t)n);
}

int symbols_elf_has_type(Elf *elf, unsigned type)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == type && sh.sh_size > 0)
            return 1;
    }
    return 0;
}

Elf_Scn *symbols_elf_section(Elf *elf, const char *name)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return NULL;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        const char *n = elf_strptr(elf, shstrndx, sh.sh_name);
        if (n && strcmp(n, name) == 0)
            return scn;
    }
    return NULL;
}

int symbols_elf_tls_symbol(const char *path, const char *name,
                           uint64_t *value)
{
    Elf *elf = symbols_elf_open_file(path);
    if (!elf)
        return -1;
    int found = -1;
    Elf_Scn *scn = NULL;
    while (found != 0 && (scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB ||
            sh.sh_entsize == 0)
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        size_t count = data ? sh.sh_size / sh.sh_entsize : 0;
        for (size_t i = 0; i < count; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(data, (int)i, &sym))
                break;
            if (GELF_ST_TYPE(sym.st_info) != STT_TLS ||
                sym.st_shndx == SHN_UNDEF)
                continue;
            const char *n = elf_strptr(elf, sh.sh_link, sym.st_name);
            if (n && strcmp(n, name) == 0) {
                *value = sym.st_value;
                found = 0;
                break;
            }
        }
    }
    elf_end(elf);
    return found;
}

int symbols_elf_each_function(Elf *elf, unsigned type,
                              int (*fn)(void *ctx, uint64_t value,
                                        uint64_t size, unsigned char info,
                                        const char *name),
                              void *ctx)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != type ||
            sh.sh_entsize == 0)
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        if (!data)
            continue;
        size_t count = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; i < count; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(data, (int)i, &sym))
                break;
            int t = GELF_ST_TYPE(sym.st_info);
            if (t != STT_FUNC && t != STT_GNU_IFUNC)
                continue;
            if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0)
                continue;
            const char *name = elf_strptr(elf, sh.sh_link, sym.st_name);
            if (!name || !*name)
                continue;
            int r = fn(ctx, sym.st_value, sym.st_size, sym.st_info, name);
            if (r)
                return r;
        }
    }
    return 0;
}
