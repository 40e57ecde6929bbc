/*
 * Symbolization: which object covers an address, and what function, file
 * and line it is. Owned by agent/symbols/symbols.c (mappings from /proc/self/maps,
 * GNU build IDs, ELF .symtab/.dynsym, demangling), agent/symbols/symbols_debug.c
 * (separate debug files by build ID and .gnu_debuglink, MiniDebugInfo) and
 * agent/symbols/symbols_dwarf.c (file:line through libdw).
 *
 * Entered only from the agent's own threads, while a profile is encoded or
 * /debug/pprof/symbol is answered; never from a signal handler and never
 * from inside an interposed call. Everything
 * is resolved lazily per object; symbols_release() gives the objects'
 * tables and DWARF back once a request is answered, and a bounded cache of
 * answers by address (owning its strings) keeps the next profile of the
 * same addresses from loading them again. docs/memory.md has the costs.
 */
#ifndef PPROF_SYMBOLS_H
#define PPROF_SYMBOLS_H

#include "agent/stacks/stack.h" /* FRAME_*: the recording layer's pseudo frames */
#include "agent/core/hash.h"

#include <stddef.h>
#include <stdint.h>

/* Returns the display name of a pseudo frame ("[truncated]", ...), or NULL
 * when pc is a real address. Async-signal-safe. Does not allocate. */
const char *symbols_pseudo_name(uintptr_t pc);

/* One executable segment of a loaded object, as in /proc/self/maps. */
struct sym_mapping {
    uintptr_t start;
    uintptr_t limit;
    uintptr_t offset;
    const char *path;     /* " (deleted)" removed; "[vdso]" kept */
    const char *build_id; /* lowercase hex of NT_GNU_BUILD_ID, "" if none */
    int has_symbols;      /* the object has a symbol table we could read */
};

/* One frame of an address; several when functions were inlined. */
struct sym_frame {
    const char *name;        /* demangled (short with PPROF_SYMBOLS=short) */
    const char *system_name; /* as in the symbol table (mangled); the full
                              * demangled name with PPROF_SYMBOLS=short */
    const char *file;        /* source file, NULL when unknown */
    int line;                /* 0 when unknown */
    int start_line;          /* line of the function's declaration, or 0 */
    uintptr_t sym_start;     /* runtime address of the symbol, or 0 */
    int unwind_named;        /* no symbol: named "object+0xSTART" after
                              * the function's start in the unwind tables */
};

/* The symbolizer is shared by all HTTP workers: hold the lock from refresh
 * to the last use of any string it returned. Not async-signal-safe. */
void symbols_lock(void);
void symbols_unlock(void);

/* Re-reads the mappings when objects were loaded or unloaded since the last
 * refresh (or on first use). Returns 0 or -errno. Lock held.
 * Not async-signal-safe. */
int symbols_refresh(void);

/* The executable mappings, main executable first. Lock held.
 * Not async-signal-safe. */
size_t symbols_mapping_count(void);
const struct sym_mapping *symbols_mapping_at(size_t i);
/* Index of the mapping that covers addr, or -1. Lock held.
 * Not async-signal-safe. */
int symbols_mapping_index(uintptr_t addr);

/* Resolves addr into at most max frames, innermost inlined function first,
 * and returns how many were written (0: unknown). Strings stay valid until
 * the next refresh. Lock held. Not async-signal-safe. */
int symbols_resolve(uintptr_t addr, struct sym_frame *out, int max);

/* Calls fn once for each loaded object whose function names are incomplete
 * (no .symtab of its own, no separate debug file, no MiniDebugInfo), with
 * its path, its build ID ("" when none) and whether exported (.dynsym)
 * names at least exist. Searches debug files for objects not searched yet.
 * The agent's own objects (symbols_agent_only) are left out.
 * Takes the lock itself; fn runs with it held and must not call back into
 * the symbolizer. Returns how many objects were listed.
 * Not async-signal-safe. */
size_t symbols_list_unnamed(void (*fn)(void *arg, const char *path,
                                       const char *build_id,
                                       int exported_only),
                            void *arg);

/* A file: its device (major << 32 | minor, as struct maps_entry) and
 * inode. */
struct sym_file_id {
    uint64_t dev;
    uint64_t inode;
};

/* The loaded objects there only for the agent (itself, and the libraries
 * it needs that the program does not), at most max, into out; returns how
 * many (symbols_own.c). Takes the loader's lock: never call it with the
 * symbolizer's lock held. Not async-signal-safe. */
size_t symbols_agent_only(struct sym_file_id *out, size_t max);

/* The Debian packages that own the files at paths[0..n), into pkgs[i]
 * (NULL when no package owns it or the package database cannot be read):
 * read once from /var/lib/dpkg/info/ for the paths not asked before, and
 * kept (symbols_package.c). The strings live as long as the process.
 * Not async-signal-safe. */
void symbols_packages(const char *const *paths, size_t n, const char **pkgs);

/* Gives back the memory the last requests' lookups loaded (per object:
 * function tables, DWARF and the debug files' decompressed sections),
 * keeping the cache of answers by address (a few MB at most, owning its
 * strings) so that the next profile of the same addresses loads nothing.
 * Call when a request is answered, without the lock. Strings returned
 * before die. Not async-signal-safe. */
void symbols_release(void);

/* In a fork child (the only thread): when a thread of the parent held the
 * symbolizer's lock at fork time, starts over with an empty state (the old
 * one, perhaps half-changed, is left alone) and a fresh lock.
 * Async-signal-safe. Does not allocate. */
void symbols_fork_child(void);


/* ---- internal to agent/symbols/ and agent/host/maps.c -------------------- */

/* Demangles a C++ or Rust symbol with libiberty. Returns a malloc'd string,
 * or NULL when name is not mangled (or on OOM). Not async-signal-safe. */
char *symbols_demangle(const char *name);

/* One executable entry of /proc/self/maps (maps.c). */
struct maps_entry {
    uintptr_t start;
    uintptr_t limit;
    uintptr_t offset;
    uint64_t dev;
    uint64_t inode;
    int deleted; /* the path ended in " (deleted)", now removed */
    char *path;  /* "" for an unnamed entry */
};

/* Reads the executable entries of /proc/self/maps in maps order, skipping
 * unnamed inode-0 ones. On success *out is a malloc'd array of *n entries
 * for maps_free(). Returns 0 or -errno. Not async-signal-safe. */
int maps_read(struct maps_entry **out, size_t *n);
void maps_free(struct maps_entry *e, size_t n);

/* A function symbol, at a link-time (file) address. */
struct sym_func {
    uint64_t addr;
    uint64_t size; /* 0: unknown, runs to the next symbol */
    const char *name;
};

/* An executable PT_LOAD segment. */
struct sym_segment {
    uint64_t vaddr;
    uint64_t memsz;
    uint64_t offset;
    uint64_t filesz;
};

/* A DWARF frame (symbols_dwarf.c); strings live as long as the object. */
struct dwarf_frame {
    const char *name; /* linkage name when there is one, NULL if unknown */
    const char *file;
    int line;
    int decl_line;
    int inlined; /* 0: the physical function (or unknown) */
};

struct Elf;
struct Elf_Scn;
struct Dwarf;
struct name_entry;

/* One loaded object (executable, shared library, [vdso]), shared by every
 * mapping of it and cached across refreshes while it stays mapped. */
struct sym_object {
    char *path;
    char *build_id; /* lowercase hex, "" when none */
    uint64_t dev;
    uint64_t inode;
    struct Elf *elf;  /* mmap'd by libelf; NULL when the file is unreadable */
    void *image;      /* private copy of an in-memory object ([vdso]) */
    int has_symbols;  /* a .symtab or .dynsym section exists */
    struct sym_segment *segs;
    size_t nsegs;

    int loaded; /* symbol table and DWARF were tried (lazily) */
    struct sym_func *funcs;
    size_t nfuncs;
    char *plt_names; /* the "<target>@plt" names funcs points into */
    struct Dwarf *dwarf;

    /* Filled once by symbols_debug_find(). */
    int debug_searched;
    int source;            /* enum sym_source */
    struct Elf *debug_elf; /* separate debug file, by build ID or debuglink */
    char *debug_path;      /* where it was found, NULL when none */
    struct Elf *mini_elf;  /* decompressed .gnu_debugdata (MiniDebugInfo) */
    void *mini_image;      /* the buffer mini_elf reads */
    int logged;            /* the missing-names line was written */

    /* Demangled names (struct name_entry, symbols.c), in the order first
     * asked, by the address of the mangled string. */
    struct group_table names;
    int mark; /* still mapped, during a refresh */

    /* Names made for code without a symbol ("object+0xSTART"), freed with
     * the demangled names. */
    char **made;
    uint64_t *made_at; /* the file address each names */
    size_t nmade;
};

/* Where an object's function names come from, worst first. */
enum sym_source {
    SYM_SOURCE_NONE,       /* no symbol table at all */
    SYM_SOURCE_DYNAMIC,    /* .dynsym only: exported functions, no statics */
    SYM_SOURCE_MINIDEBUG,  /* .gnu_debugdata: every function, no lines */
    SYM_SOURCE_DEBUG_FILE, /* separate debug file: full .symtab */
    SYM_SOURCE_OWN,        /* the object's own .symtab */
};

/* symbols_elf.c: opens path (falling back to alt_path when not NULL),
 * reads its build ID and executable segments. Returns 0 or -errno; on
 * error the object stays usable with no symbols. Not async-signal-safe. */
int symbols_elf_open(struct sym_object *o, const char *path,
                     const char *alt_path);
/* Same for an object already in memory (the [vdso] image, size bytes).
 * Not async-signal-safe. */
int symbols_elf_open_memory(struct sym_object *o, const void *image,
                            size_t size);
/* Computes runtime minus file address for a mapping of o that starts at
 * start with file offset offset. Returns 0 or -ENOENT. Not async-signal-safe. */
int symbols_elf_bias(const struct sym_object *o, uintptr_t start,
                     uintptr_t offset, uintptr_t *bias);
/* Builds the function table (first use), from the source
 * symbols_debug_find() chose: call that first. Not async-signal-safe. */
void symbols_elf_load(struct sym_object *o);
/* The function symbol covering file address addr, or NULL.
 * Not async-signal-safe. Does not allocate. */
const struct sym_func *symbols_elf_lookup(const struct sym_object *o,
                                          uint64_t addr);
/* The file address of the start of the function covering file address
 * addr, from o's unwind tables (.eh_frame_hdr and .eh_frame, which name
 * every function the compiler emitted, stripped or not). Returns 0 or
 * -ENOENT. Not async-signal-safe. Does not allocate. */
int symbols_elf_function_start(const struct sym_object *o, uint64_t addr,
                               uint64_t *start);
/* Releases what symbols_elf_* attached to o; symbols_dwarf_close() and
 * symbols_debug_close() come first (they read o's ELF).
 * Not async-signal-safe. */
void symbols_elf_close(struct sym_object *o);
/* Gives back what the first lookup loaded (function table, DWARF, the
 * debug file's handle and its decompressed sections), keeping what finds
 * them again (the object's own handle, segments, the debug file's path);
 * the next lookup loads them anew. Not async-signal-safe. */
void symbols_elf_unload(struct sym_object *o);

/* symbols_elf_file.c: reading ELF files, below the rest of the
 * symbolizer (it calls none of it). */

/* Loads the agent's own libelf and libdw (agent/core/libs.h) and tells libelf
 * the version the agent speaks, once, before any other libelf call.
 * Returns 0, or -1 when they cannot be loaded. Not async-signal-safe. */
int symbols_elf_init(void);
/* Opens an ELF file read-only through a libelf mmap (no descriptor kept).
 * NULL when it cannot be opened or is not ELF. Not async-signal-safe. */
struct Elf *symbols_elf_open_file(const char *path);
/* The GNU build ID of elf as lowercase hex ("" when none), malloc'd; NULL
 * on OOM. Not async-signal-safe. */
char *symbols_elf_build_id(struct Elf *elf);
/* 1 when elf has a non-empty section of the given sh_type (SHT_SYMTAB...).
 * Not async-signal-safe. Does not allocate. */
int symbols_elf_has_type(struct Elf *elf, unsigned type);
/* Calls fn for each defined, named function (STT_FUNC, STT_GNU_IFUNC) of
 * every section of the given sh_type, in the order they stand; stops at
 * the first call that returns non-zero and returns that value, else 0.
 * Not async-signal-safe. Does not allocate. */
/* Calls fn for each stub of the procedure linkage table that jumps through
 * a relocated slot, as a function "<target>@plt" of the stub's size, and
 * sets *names to the block holding those names (the caller frees it after
 * the last use). Returns as symbols_elf_each_function. x86-64; elsewhere
 * none. Not async-signal-safe (allocates). */
int symbols_plt_each(struct Elf *elf, char **names,
                     int (*fn)(void *ctx, uint64_t value, uint64_t size,
                               unsigned char info, const char *name),
                     void *ctx);
int symbols_elf_each_function(struct Elf *elf, unsigned type,
                              int (*fn)(void *ctx, uint64_t value,
                                        uint64_t size, unsigned char info,
                                        const char *name),
                              void *ctx);
/* The value of the thread-local (STT_TLS) symbol called name in the
 * symbol table of the ELF file at path (its offset in the file's TLS
 * segment) into *value: 0, or -1 when there is none. Not
 * async-signal-safe. */
int symbols_elf_tls_symbol(const char *path, const char *name,
                           uint64_t *value);
/* The section called name, or NULL. Not async-signal-safe. */
struct Elf_Scn *symbols_elf_section(struct Elf *elf, const char *name);

/* symbols_debug.c: finds what o lacks, once: a separate debug file (build
 * ID tree, then .gnu_debuglink with its CRC checked, in PPROF_DEBUG_DIR
 * directories before /usr/lib/debug) when o has no .symtab or no DWARF,
 * and MiniDebugInfo when no full symbol table was found. Sets o->source.
 * A corrupt candidate is logged once and skipped. Not async-signal-safe. */
void symbols_debug_find(struct sym_object *o);
/* Writes the one log line for an object that has no full symbol table
 * (first time only, rate-limited across objects). Not async-signal-safe. */
void symbols_debug_report(struct sym_object *o);
/* Releases what symbols_debug_find() attached. Not async-signal-safe. */
void symbols_debug_close(struct sym_object *o);
/* Closes the debug file's handle (with the sections libelf decompressed),
 * keeping its path; symbols_debug_reopen() opens it again, when it still
 * has the object's build ID. Not async-signal-safe. */
void symbols_debug_unload(struct sym_object *o);
void symbols_debug_reopen(struct sym_object *o);
/* The CRC that .gnu_debuglink records for the file at path (zlib's CRC-32,
 * as binutils computes it). Returns 0 or -errno. Not async-signal-safe. */
int symbols_debug_crc(const char *path, uint32_t *crc);

/* symbols_dwarf.c: opens the DWARF of o (its debug file when there is one).
 * Not async-signal-safe. */
void symbols_dwarf_load(struct sym_object *o);
/* Frames at file address addr, innermost inlined function first; returns
 * how many were written (0: no DWARF covers addr). Not async-signal-safe. */
int symbols_dwarf_frames(struct sym_object *o, uint64_t addr,
                         struct dwarf_frame *out, int max);
void symbols_dwarf_close(struct sym_object *o);

/* ---- short names (symbols_short.c) --------------------------------------- */

/* PPROF_SYMBOLS=short: profiles name functions by their short names. Set
 * once by symbols_short_init() in the constructor. */
extern int opt_symbols_short;

/* Reads PPROF_SYMBOLS (short or full; a bad value is one line and full).
 * Called once by the constructor. Not async-signal-safe. */
void symbols_short_init(void);

/*
 * Writes the short form of a demangled name into out (at most size bytes
 * with the NUL): no parameter lists, template arguments or return type, as
 * pprof simplifies the names it demangles ("std::vector<int>::push_back(
 * int const&)" gives "std::vector::push_back"); operators, "(anonymous
 * namespace)" and lambda names kept. A C name comes out unchanged. Returns
 * its length. Async-signal-safe. Does not allocate.
 */
size_t symbols_short_name(const char *full, char *out, size_t size);

#endif
