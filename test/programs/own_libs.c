/*
 * A host with its own copies of the libraries the agent uses, exported
 * (-rdynamic, as varnishd exports its zlib): broken ones, each of which
 * says so on stderr ("host's NAME called") and fails. The agent's
 * compression and symbolization must not use them.
 *
 *   own_libs SECONDS
 *
 * Burns CPU in own_libs_burn until SECONDS have passed; prints "ready".
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spin.h"
#include "timing.h"

static void said(const char *name)
{
    char line[80];
    int n = snprintf(line, sizeof line, "host's %s called\n", name);
    if (write(2, line, (size_t)n) < 0)
        _exit(9);
}

#define BROKEN_INT(name)                                                   \
    __attribute__((visibility("default"))) int name(void)                  \
    {                                                                      \
        said(#name);                                                       \
        return -2;                                                         \
    }
#define BROKEN_PTR(name)                                                   \
    __attribute__((visibility("default"))) void *name(void)                \
    {                                                                      \
        said(#name);                                                       \
        return NULL;                                                       \
    }

/* zlib: Z_STREAM_ERROR */
BROKEN_INT(deflate) BROKEN_INT(deflateInit2_) BROKEN_INT(deflateEnd)
BROKEN_INT(inflate) BROKEN_INT(inflateInit2_) BROKEN_INT(inflateEnd)
BROKEN_INT(inflateReset) BROKEN_INT(crc32) BROKEN_INT(crc32_z)
BROKEN_INT(compress2) BROKEN_INT(uncompress)
/* liblzma */
BROKEN_INT(lzma_code) BROKEN_INT(lzma_stream_decoder) BROKEN_INT(lzma_end)
/* libelf (also what libdw calls inside) */
BROKEN_PTR(elf_begin) BROKEN_PTR(elf_memory) BROKEN_INT(elf_version)
BROKEN_INT(elf_kind) BROKEN_INT(elf_end) BROKEN_PTR(elf_getscn)
BROKEN_PTR(elf_nextscn) BROKEN_PTR(elf_getdata) BROKEN_PTR(elf_rawdata)
BROKEN_PTR(elf_strptr) BROKEN_INT(elf_getshdrstrndx) BROKEN_PTR(gelf_getshdr)
BROKEN_PTR(gelf_getehdr) BROKEN_PTR(gelf_getsym) BROKEN_PTR(elf64_getshdr)
BROKEN_PTR(elf64_getehdr) BROKEN_INT(elf_cntl) BROKEN_PTR(elf_getident)
/* libdw */
BROKEN_PTR(dwarf_begin_elf) BROKEN_INT(dwarf_end) BROKEN_PTR(dwarf_addrdie)

__attribute__((noinline)) void own_libs_burn(long n) { spin(n); }

int main(int argc, char **argv)
{
    long secs = argc > 1 ? atol(argv[1]) : 60;
    printf("ready\n");
    fflush(stdout);
    long start = now_ns();
    while (now_ns() - start < secs * 1000000000L)
        own_libs_burn(200000);
    return 0;
}
