/*
 * The libraries the agent reads ELF, DWARF and compressed data with (libdw,
 * libelf, zlib, liblzma), reached through a handle of their own: a host
 * that exports functions of the same names (varnishd its own zlib, a
 * program with libelf built in, -rdynamic) must not catch the agent's calls
 * nor libdw's calls into libelf and zlib. See agent/core/libs.c.
 *
 * A file that calls them includes this header after the libraries' own
 * headers; each name then stands for the pointer resolved from the
 * agent's handle. Entry points call libs_load() first.
 */
#ifndef PPROF_LIBS_H
#define PPROF_LIBS_H

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <gelf.h>
#include <libelf.h>
#include <lzma.h>
#include <zlib.h>

/* The library the agent opens; it brings the others as its dependencies. */
#define LIBS_SONAME "libdw.so.1"

#define LIBS_FUNCTIONS(X)                                                  \
    X(elf_begin) X(elf_cntl) X(elf_end) X(elf_getdata) X(elf_getphdrnum)   \
    X(elf_getscn) X(elf_getshdrstrndx) X(elf_kind) X(elf_memory)           \
    X(elf_nextscn) X(elf_rawdata) X(elf_rawfile) X(elf_strptr) X(elf_version) \
    X(gelf_getehdr) X(gelf_getphdr) X(gelf_getrela) X(gelf_getshdr)        \
    X(gelf_getsym) X(dwelf_elf_gnu_build_id) X(dwarf_addrdie) X(dwarf_attr) \
    X(dwarf_attr_integrate) X(dwarf_begin_elf) X(dwarf_child)              \
    X(dwarf_decl_line) X(dwarf_diename) X(dwarf_end) X(dwarf_filesrc)      \
    X(dwarf_formstring) X(dwarf_formudata) X(dwarf_getsrc_die)             \
    X(dwarf_getsrcfiles) X(dwarf_haspc) X(dwarf_lineno) X(dwarf_linesrc)   \
    X(dwarf_siblingof) X(dwarf_tag) X(crc32) X(crc32_z) X(deflate)         \
    X(deflateEnd) X(deflateInit2_) X(inflate) X(inflateEnd)                \
    X(inflateInit2_) X(inflateReset) X(lzma_code) X(lzma_end)              \
    X(lzma_stream_decoder)

struct libs {
#define LIBS_MEMBER(name) __typeof__(&name) name;
    LIBS_FUNCTIONS(LIBS_MEMBER)
#undef LIBS_MEMBER
};

extern struct libs libs_fn;

/* Loads the libraries once (any thread, not a signal handler). Returns 0,
 * or -1 (logged once) when they cannot be loaded: callers fail their
 * request then. */
int libs_load(void);

#ifndef PPROF_LIBS_SELF
#define elf_begin (libs_fn.elf_begin)
#define elf_cntl (libs_fn.elf_cntl)
#define elf_end (libs_fn.elf_end)
#define elf_getdata (libs_fn.elf_getdata)
#define elf_getphdrnum (libs_fn.elf_getphdrnum)
#define elf_getscn (libs_fn.elf_getscn)
#define elf_getshdrstrndx (libs_fn.elf_getshdrstrndx)
#define elf_kind (libs_fn.elf_kind)
#define elf_memory (libs_fn.elf_memory)
#define elf_nextscn (libs_fn.elf_nextscn)
#define elf_rawdata (libs_fn.elf_rawdata)
#define elf_rawfile (libs_fn.elf_rawfile)
#define elf_strptr (libs_fn.elf_strptr)
#define elf_version (libs_fn.elf_version)
#define gelf_getehdr (libs_fn.gelf_getehdr)
#define gelf_getphdr (libs_fn.gelf_getphdr)
#define gelf_getrela (libs_fn.gelf_getrela)
#define gelf_getshdr (libs_fn.gelf_getshdr)
#define gelf_getsym (libs_fn.gelf_getsym)
#define dwelf_elf_gnu_build_id (libs_fn.dwelf_elf_gnu_build_id)
#define dwarf_addrdie (libs_fn.dwarf_addrdie)
#define dwarf_attr (libs_fn.dwarf_attr)
#define dwarf_attr_integrate (libs_fn.dwarf_attr_integrate)
#define dwarf_begin_elf (libs_fn.dwarf_begin_elf)
#define dwarf_child (libs_fn.dwarf_child)
#define dwarf_decl_line (libs_fn.dwarf_decl_line)
#define dwarf_diename (libs_fn.dwarf_diename)
#define dwarf_end (libs_fn.dwarf_end)
#define dwarf_filesrc (libs_fn.dwarf_filesrc)
#define dwarf_formstring (libs_fn.dwarf_formstring)
#define dwarf_formudata (libs_fn.dwarf_formudata)
#define dwarf_getsrc_die (libs_fn.dwarf_getsrc_die)
#define dwarf_getsrcfiles (libs_fn.dwarf_getsrcfiles)
#define dwarf_haspc (libs_fn.dwarf_haspc)
#define dwarf_lineno (libs_fn.dwarf_lineno)
#define dwarf_linesrc (libs_fn.dwarf_linesrc)
#define dwarf_siblingof (libs_fn.dwarf_siblingof)
#define dwarf_tag (libs_fn.dwarf_tag)
#define crc32 (libs_fn.crc32)
#define crc32_z (libs_fn.crc32_z)
#define deflate (libs_fn.deflate)
#define deflateEnd (libs_fn.deflateEnd)
#define deflateInit2_ (libs_fn.deflateInit2_)
#define inflate (libs_fn.inflate)
#define inflateEnd (libs_fn.inflateEnd)
#define inflateInit2_ (libs_fn.inflateInit2_)
#define inflateReset (libs_fn.inflateReset)
#define lzma_code (libs_fn.lzma_code)
#define lzma_end (libs_fn.lzma_end)
#define lzma_stream_decoder (libs_fn.lzma_stream_decoder)
#endif

#endif
