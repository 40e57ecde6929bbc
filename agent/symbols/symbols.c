/*
 * symbols.c owns the symbolizer's state: the executable mappings of the
 * process (main executable first), the cache of loaded objects keyed by
 * path and build ID, demangling, and the composition of ELF names with
 * DWARF frames into the answer of symbols_resolve().
 *
 * The agent's own threads (HTTP workers) enter it with symbols_lock() held.
 * Loaded objects changing is learnt by comparing the loaded-objects
 * generation (objects.c), which the dlopen/dlclose interposers bump.
 * Nothing here may run in a signal handler: loading an object allocates
 * and maps files.
 */
#include "agent/symbols/symbols.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/guard.h"
#include "agent/log.h"
#include "agent/stacks/objects.h"
#include "agent/core/own_memory.h"
#include "agent/host/proc.h"
#include "agent/core/hash.h"
#include "agent/stacks/stack.h"

#include <errno.h>
#include <libiberty/demangle.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Everything below is protected by `lock`. */
struct slot {
    struct sym_mapping pub;
    struct sym_object *obj; /* NULL for [vsyscall] and unreadable objects */
    uintptr_t bias;         /* runtime address minus file address */
    int has_bias;
};

static struct slot *slots;
static size_t nslots;
static size_t *by_addr; /* slot indexes sorted by start, for lookups */
static struct sym_object **objects;
static size_t nobjects;
static int refreshed;
static unsigned seen_generation;
static char *exe_path;
static char *main_path; /* what profiles show for it (program.c) */
static int holding; /* see symbols_release() */

struct name_entry {
    const char *mangled;
    char *demangled;  /* NULL: not mangled, use the name as is */
    char *short_name; /* PPROF_SYMBOLS=short; NULL: same as the full name */
};

const char *symbols_pseudo_name(uintptr_t pc)
{
    switch (pc) {
    case FRAME_TRUNCATED:
        return "[truncated]";
    case FRAME_LOST:
        return "[lost samples]";
    case FRAME_UNAVAILABLE:
        return "[stack unavailable]";
    case FRAME_NOT_NOTED:
        return "[stack unavailable: not dumpable, waiting in a call the "
               "agent does not note]";
    case FRAME_UNSAMPLED:
        return "[cpu not sampled]";
    default:
        return pc < FRAME_PSEUDO_MAX ? "[unknown]" : NULL;
    }
}

/* Threads between the start of symbols_lock() and the end of
 * symbols_unlock(): 0 in a fork child means the lock is free there, known
 * by a read (a trylock writes the lock's page: a fault in every fork). */
static int lock_users FORK_STATE;

void symbols_lock(void)
{
    __atomic_add_fetch(&lock_users, 1, __ATOMIC_SEQ_CST);
    real_pthread_mutex_lock(&lock);
}

void symbols_unlock(void)
{
    real_pthread_mutex_unlock(&lock);
    __atomic_sub_fetch(&lock_users, 1, __ATOMIC_SEQ_CST);
}

char *symbols_demangle(const char *name)
{
    /* _Z: Itanium C++ and legacy Rust (which libiberty detects by its
     * trailing hash); _R: Rust v0. Anything else is a C name. */
    if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
        return NULL;
    size_t len = strlen(name);
    static const char plt[] = "@plt";
    if (len <= sizeof plt - 1 || strcmp(name + len - (sizeof plt - 1), plt))
        return cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI);
    /* A PLT stub (symbols_plt.c): the target's name, then "@plt". */
    char *base = strndup(name, len - (sizeof plt - 1));
    char *d = base ? cplus_demangle(base, DMGL_PARAMS | DMGL_ANSI) : NULL;
    real_free(base);
    if (!d)
        return NULL;
    size_t dn = strlen(d);
    char *out = real_realloc(d, dn + sizeof plt);
    if (!out) {
        real_free(d);
        return NULL;
    }
    memcpy(out + dn, plt, sizeof plt);
    return out;
}

/* ---- per-object demangled-name cache ----------------------------------- */

/* Names are keyed by the address of the mangled string, which lives in the
 * object's mapped file or in libdw and so is stable while the object is. */
static int name_eq(const void *ctx, size_t idx, const void *key)
{
    const struct name_entry *e = group_at(ctx, idx);
    return e->mangled == key;
}

/* The entry for mangled, added (demangled, shortened) when new; NULL when
 * out of memory. */
static struct name_entry *name_entry_of(struct sym_object *o,
                                        const char *mangled)
{
    int added;
    struct name_entry *e =
        group_find_or_add(&o->names, hash_splitmix64((uintptr_t)mangled),
                          name_eq, mangled, &added);
    if (!e || !added)
        return e;
    e->mangled = mangled;
    e->demangled = symbols_demangle(mangled);
    if (opt_symbols_short) {
        const char *full = e->demangled ? e->demangled : mangled;
        size_t len = strlen(full);
        char *sn = real_malloc(len + 1);
        if (sn && symbols_short_name(full, sn, len + 1) > 0 &&
            strcmp(sn, full) != 0)
            e->short_name = sn;
        else
            real_free(sn);
    }
    return e;
}

/* Sets f's name and system_name for a symbol-table or DWARF name: the
 * demangled name and the mangled one, or with PPROF_SYMBOLS=short the short
 * name and the full demangled one. Cached per object. */
static void frame_names(struct sym_object *o, const char *mangled,
                        struct sym_frame *f)
{
    f->name = f->system_name = mangled;
    if (!mangled || (mangled[0] != '_' &&
                     !(opt_symbols_short && strpbrk(mangled, "<( "))))
        return;
    const struct name_entry *slot = name_entry_of(o, mangled);
    if (!slot)
        return; /* out of memory: the mangled name is still right */
    const char *full = slot->demangled ? slot->demangled : mangled;
    f->name = slot->short_name ? slot->short_name : full;
    if (opt_symbols_short)
        f->system_name = full;
}

static void names_free(struct sym_object *o)
{
    for (size_t i = 0; i < o->nmade; i++)
        real_free(o->made[i]);
    real_free(o->made);
    real_free(o->made_at);
    o->made = NULL;
    o->made_at = NULL;
    o->nmade = 0;
    for (size_t i = 0; i < o->names.n; i++) {
        struct name_entry *e = group_at(&o->names, i);
        real_free(e->demangled);
        real_free(e->short_name);
    }
    group_table_free(&o->names);
}

/* ---- objects ---------------------------------------------------------- */

static void object_free(struct sym_object *o)
{
    if (!o)
        return;
    /* DWARF and the debug file read the object's ELF: closed first. */
    symbols_dwarf_close(o);
    symbols_debug_close(o);
    symbols_elf_close(o);
    names_free(o);
    real_free(o->path);
    real_free(o->build_id);
    real_free(o);
}

/* Finds a cached object for a maps entry. The same path on the same inode
 * is the same file without opening it; otherwise the file is opened and
 * matched by path and build ID (a library replaced on disk gets a new
 * object). */
static struct sym_object *object_for(const struct maps_entry *e)
{
    for (size_t i = 0; i < nobjects; i++) {
        struct sym_object *o = objects[i];
        if (o->inode == e->inode && o->dev == e->dev &&
            strcmp(o->path, e->path) == 0)
            return o;
    }

    struct sym_object *o = real_calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->names.size = sizeof(struct name_entry);
    o->path = strdup(e->path);
    o->dev = e->dev;
    o->inode = e->inode;
    if (!o->path)
        goto fail;
    if (strcmp(e->path, "[vdso]") == 0) {
        const void *image = (const void *)getauxval(AT_SYSINFO_EHDR);
        if (image)
            symbols_elf_open_memory(o, image, e->limit - e->start);
    } else if (e->path[0] == '/') {
        /* A deleted file's path may now name another file; the kernel
         * still offers the mapped one through map_files. */
        char alt[64];
        snprintf(alt, sizeof alt, "/proc/self/map_files/%lx-%lx",
                 (unsigned long)e->start, (unsigned long)e->limit);
        if (e->deleted)
            symbols_elf_open(o, alt, e->path);
        else
            symbols_elf_open(o, e->path, alt);
    }
    if (!o->build_id)
        o->build_id = strdup("");
    if (!o->build_id)
        goto fail;

    for (size_t i = 0; i < nobjects; i++) {
        struct sym_object *c = objects[i];
        if (strcmp(c->path, o->path) == 0 && *o->build_id &&
            strcmp(c->build_id, o->build_id) == 0) {
            object_free(o);
            return c;
        }
    }
    struct sym_object **nv = real_realloc(objects, (nobjects + 1) * sizeof *nv);
    if (!nv)
        goto fail;
    objects = nv;
    objects[nobjects++] = o;
    return o;
fail:
    object_free(o);
    return NULL;
}

/* ---- refresh ---------------------------------------------------------- */

static void cache_clear(void);

static int cmp_by_start(const void *a, const void *b)
{
    uintptr_t x = slots[*(const size_t *)a].pub.start;
    uintptr_t y = slots[*(const size_t *)b].pub.start;
    return x < y ? -1 : x > y;
}

static void resolve_exe_path(void)
{
    if (exe_path)
        return;
    char buf[PATH_MAX];
    if (realpath("/proc/self/exe", buf))
        exe_path = strdup(buf);
    /* The path the program was started by when it is a link to the same
     * file: pprof says "File: redis-server" and names saved profiles so,
     * and the path still opens the binary for offline symbolization. */
    if (exe_path && !main_path)
        main_path = strdup(program_main_path(exe_path));
}

/* The path to show for object o. */
static const char *shown_path(const struct sym_object *o)
{
    if (main_path && exe_path && strcmp(o->path, exe_path) == 0)
        return main_path;
    return o->path;
}

/* Moves the main executable's entries to the front, keeping maps order
 * among the rest; without a known path the first entry stays first, which
 * is the executable for every ordinary (non-ld.so-launched) process. */
static void main_first(struct maps_entry *e, size_t n)
{
    if (!exe_path)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(e[i].path, exe_path) != 0)
            continue;
        struct maps_entry t = e[i];
        memmove(&e[k + 1], &e[k], (i - k) * sizeof *e);
        e[k++] = t;
    }
}

static void clear_slots(void)
{
    real_free(slots);
    real_free(by_addr);
    slots = NULL;
    by_addr = NULL;
    nslots = 0;
}

int symbols_refresh(void)
{
    /* Read the loaded-objects generation before the maps: a dlclose that
     * finishes during the read bumps it again and forces the next
     * refresh. */
    unsigned gen = objects_generation();
    if (refreshed && gen == seen_generation)
        return 0;
    resolve_exe_path();

    struct maps_entry *e = NULL;
    size_t n = 0;
    int err = maps_read(&e, &n);
    if (err)
        return err;
    main_first(e, n);

    struct slot *ns = real_calloc(n ? n : 1, sizeof *ns);
    size_t *nidx = real_calloc(n ? n : 1, sizeof *nidx);
    if (!ns || !nidx) {
        real_free(ns);
        real_free(nidx);
        maps_free(e, n);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nobjects; i++)
        objects[i]->mark = 0;
    for (size_t i = 0; i < n; i++) {
        struct sym_object *o = object_for(&e[i]);
        struct slot *s = &ns[i];
        s->obj = o;
        s->pub.start = e[i].start;
        s->pub.limit = e[i].limit;
        s->pub.offset = e[i].offset;
        if (o) {
            o->mark = 1;
            s->pub.path = shown_path(o);
            s->pub.build_id = o->build_id;
            s->pub.has_symbols = o->has_symbols;
            s->has_bias =
                symbols_elf_bias(o, e[i].start, e[i].offset, &s->bias) == 0;
        } else {
            /* Out of memory for this object: keep the mapping, nameless. */
            s->pub.path = "";
            s->pub.build_id = "";
        }
        nidx[i] = i;
    }
    maps_free(e, n);

    /* Objects no longer mapped are dropped with their tables and names;
     * strings handed out before this refresh are documented to die here. */
    size_t kept = 0;
    for (size_t i = 0; i < nobjects; i++) {
        if (objects[i]->mark)
            objects[kept++] = objects[i];
        else
            object_free(objects[i]);
    }
    nobjects = kept;

    /* Cached answers name slots' objects and were made against the old
     * list; an address may now belong to a different object. */
    cache_clear();
    clear_slots();
    slots = ns;
    by_addr = nidx;
    nslots = n;
    qsort(by_addr, nslots, sizeof *by_addr, cmp_by_start);
    refreshed = 1;
    seen_generation = gen;
    return 0;
}

size_t symbols_list_unnamed(void (*fn)(void *arg, const char *path,
                                       const char *build_id,
                                       int exported_only),
                            void *arg)
{
    size_t listed = 0;
    struct sym_file_id own[64];
    size_t nown = symbols_agent_only(own, sizeof own / sizeof own[0]);
    symbols_lock();
    symbols_refresh();
    for (size_t i = 0; i < nobjects; i++) {
        struct sym_object *o = objects[i];
        /* Pseudo objects ([vdso], [vsyscall]) are the kernel's. */
        if (o->path[0] != '/')
            continue;
        size_t k = 0;
        while (k < nown && (own[k].dev != o->dev || own[k].inode != o->inode))
            k++;
        if (k < nown)
            continue; /* the agent's own, not the program's business */
        if (!o->debug_searched)
            __atomic_store_n(&holding, 1, __ATOMIC_RELAXED);
        symbols_debug_find(o);
        if (o->source >= SYM_SOURCE_MINIDEBUG)
            continue;
        /* The file itself (not a link to it): the one a debug file is for,
         * and the one its package owns. */
        fn(arg, o->path, o->build_id, o->source == SYM_SOURCE_DYNAMIC);
        listed++;
    }
    symbols_unlock();
    return listed;
}

size_t symbols_mapping_count(void)
{
    return nslots;
}

const struct sym_mapping *symbols_mapping_at(size_t i)
{
    return i < nslots ? &slots[i].pub : NULL;
}

int symbols_mapping_index(uintptr_t addr)
{
    size_t lo = 0, hi = nslots;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (slots[by_addr[mid]].pub.start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    size_t i = by_addr[lo - 1];
    return addr < slots[i].pub.limit ? (int)i : -1;
}

/* ---- resolve ---------------------------------------------------------- */

#define MAX_DWARF_FRAMES 32

/* Code without a symbol (a static function of a stripped binary) is named
 * after its object and the file address of the function it belongs to,
 * found in the unwind tables: "redis-server+0x64e40". Every address of
 * one function gets the one name, so a function is one node in pprof and
 * the flame graph, not one box per call site. NULL when the tables do not
 * cover addr (or out of memory). */
static const char *unwind_name(struct sym_object *o, uint64_t fa,
                               uint64_t *start)
{
    if (symbols_elf_function_start(o, fa, start) != 0)
        return NULL;
    for (size_t i = 0; i < o->nmade; i++)
        if (o->made_at[i] == *start)
            return o->made[i];
    /* The name the mapping shows (a link's, for the main executable
     * started through one). */
    const char *shown = shown_path(o);
    const char *base = strrchr(shown, '/');
    base = base ? base + 1 : shown;
    char buf[PATH_MAX + 24];
    log_snprintf(buf, sizeof buf, "%s+0x%llx", base,
                 (unsigned long long)*start);
    char *name = strdup(buf);
    char **nm = real_realloc(o->made, (o->nmade + 1) * sizeof *nm);
    if (nm)
        o->made = nm;
    uint64_t *na = real_realloc(o->made_at, (o->nmade + 1) * sizeof *na);
    if (na)
        o->made_at = na;
    if (!name || !nm || !na) {
        real_free(name);
        return NULL;
    }
    o->made[o->nmade] = name;
    o->made_at[o->nmade++] = *start;
    return name;
}


static int resolve_uncached(uintptr_t addr, struct sym_frame *out, int max)
{
    int mi = symbols_mapping_index(addr);
    if (mi < 0 || max <= 0)
        return 0;
    struct slot *s = &slots[mi];
    struct sym_object *o = s->obj;
    if (!o || !o->elf || !s->has_bias)
        return 0;
    if (!o->loaded) {
        __atomic_store_n(&holding, 1, __ATOMIC_RELAXED);
        /* What o lacks (a debug file, MiniDebugInfo) is found first, and a
         * debug file released after an earlier request is opened again:
         * the symbol table is loaded from whichever source that chose. */
        symbols_debug_find(o);
        symbols_debug_reopen(o);
        symbols_elf_load(o);
        symbols_dwarf_load(o);
        /* Objects that appear in a profile are the ones worth a line. */
        symbols_debug_report(o);
    }
    uint64_t fa = (uint64_t)(addr - s->bias);
    const struct sym_func *f = symbols_elf_lookup(o, fa);
    uintptr_t sym_start = f ? (uintptr_t)f->addr + s->bias : 0;

    struct dwarf_frame df[MAX_DWARF_FRAMES];
    int nd = symbols_dwarf_frames(o, fa, df,
                                  max < MAX_DWARF_FRAMES ? max
                                                         : MAX_DWARF_FRAMES);
    if (nd == 0) {
        uint64_t start;
        const char *made = f ? NULL : unwind_name(o, fa, &start);
        if (made) {
            out[0] = (struct sym_frame){
                .name = made,
                .system_name = made,
                .sym_start = (uintptr_t)start + s->bias,
                .unwind_named = 1,
            };
            return 1;
        }
        if (!f)
            return 0;
        out[0] = (struct sym_frame){.sym_start = sym_start};
        frame_names(o, f->name, &out[0]);
        return 1;
    }

    int n = 0;
    for (int i = 0; i < nd; i++) {
        const char *sys = df[i].name;
        /* The outermost frame is the physical function: its symbol-table
         * name is the one addr2line and disassemblers print, so it wins
         * over the DWARF name (they differ for aliases and clones). */
        if (!df[i].inlined && f)
            sys = f->name;
        if (!sys)
            continue;
        out[n] = (struct sym_frame){
            .file = df[i].file,
            .line = df[i].line,
            .start_line = df[i].decl_line,
            .sym_start = sym_start,
        };
        frame_names(o, sys, &out[n++]);
    }
    return n;
}

/*
 * Results by runtime address. libdw walks a unit's DIEs under its internal
 * locks for every lookup (about 20 us for a libc address), and each profile
 * request asks again for mostly the same hot addresses. Each entry owns a
 * copy of its frames and their strings, so it outlives the objects' tables
 * and DWARF, which symbols_release() gives back after every request: the
 * next profile of the same hot addresses opens nothing.
 *
 * The cache is one mapping of its own (CACHE_BYTES, pages touched on
 * demand): a table of CACHE_SLOTS entries, then the entries' frames and
 * strings, allocated by bumping. Nothing of it sits in the host's heap
 * among the blocks libdw frees, so it pins none of them, and emptying it
 * is one munmap. It is emptied when a refresh changes the mappings (the
 * entries were made against the old list), and at a release when it is
 * nearly full; when full, new answers are simply not kept (never emptied
 * during a session, whose callers may still hold its strings).
 */
#define CACHE_BYTES (2u << 20)
#define CACHE_SLOTS 16384u /* a power of two; at most half of them used */

struct cache_entry {
    uintptr_t addr; /* 0: empty slot */
    int n;
    struct sym_frame *frames; /* n frames, then their strings */
};

static struct cache_entry *cache; /* the mapping; NULL until first use */
static size_t cache_count;
static size_t cache_used; /* bytes of the mapping in use, table included */

static size_t addr_hash(uintptr_t a)
{
    return hash_fib_slot((uint64_t)a, 20, CACHE_SLOTS);
}

static void cache_clear(void)
{
    if (cache) {
        own_memory_remove(cache, CACHE_BYTES);
        munmap(cache, CACHE_BYTES);
    }
    cache = NULL;
    cache_count = cache_used = 0;
}

static int cache_open(void)
{
    if (cache)
        return 0;
    void *m = mmap(NULL, CACHE_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -ENOMEM;
    own_memory_add(m, CACHE_BYTES);
    cache = m;
    cache_used = CACHE_SLOTS * sizeof *cache;
    return 0;
}

/* Copies n frames and their strings into the cache's mapping. NULL when
 * it has no room (the answer is then not kept). */
static struct sym_frame *frames_copy(const struct sym_frame *f, int n)
{
    size_t len = (size_t)n * sizeof *f;
    for (int i = 0; i < n; i++) {
        len += f[i].name ? strlen(f[i].name) + 1 : 0;
        if (f[i].system_name && f[i].system_name != f[i].name)
            len += strlen(f[i].system_name) + 1;
        len += f[i].file ? strlen(f[i].file) + 1 : 0;
    }
    len = (len + 7) & ~(size_t)7;
    if (len > CACHE_BYTES - cache_used)
        return NULL;
    struct sym_frame *out = (struct sym_frame *)((char *)cache + cache_used);
    cache_used += len;
    char *str = (char *)(out + n);
    for (int i = 0; i < n; i++) {
        out[i] = f[i];
        const char *src[3] = {f[i].name, f[i].system_name, f[i].file};
        const char **dst[3] = {&out[i].name, &out[i].system_name,
                               &out[i].file};
        for (int k = 0; k < 3; k++) {
            if (!src[k])
                continue;
            if (k == 1 && src[1] == src[0]) {
                out[i].system_name = out[i].name;
                continue;
            }
            size_t l = strlen(src[k]) + 1;
            memcpy(str, src[k], l);
            *dst[k] = str;
            str += l;
        }
    }
    return out;
}

static int copy_out(const struct cache_entry *e, struct sym_frame *out,
                    int max)
{
    int n = e->n < max ? e->n : max;
    if (n > 0) /* frames is NULL for an address without a name */
        memcpy(out, e->frames, (size_t)n * sizeof *out);
    return n;
}

int symbols_resolve(uintptr_t addr, struct sym_frame *out, int max)
{
    if (max <= 0 || addr == 0)
        return 0;
    if (cache) {
        size_t i = addr_hash(addr);
        while (cache[i].addr && cache[i].addr != addr)
            i = (i + 1) & (CACHE_SLOTS - 1);
        if (cache[i].addr)
            return copy_out(&cache[i], out, max);
    }

    struct sym_frame tmp[MAX_DWARF_FRAMES];
    int n = resolve_uncached(addr, tmp, MAX_DWARF_FRAMES);
    /* Without room or memory for the cache the answer is still correct. */
    if (2 * (cache_count + 1) <= CACHE_SLOTS && cache_open() == 0) {
        struct sym_frame *frames = n > 0 ? frames_copy(tmp, n) : NULL;
        if (n == 0 || frames) {
            size_t i = addr_hash(addr);
            while (cache[i].addr)
                i = (i + 1) & (CACHE_SLOTS - 1);
            cache[i] = (struct cache_entry){addr, n, frames};
            cache_count++;
        }
    }
    n = n < max ? n : max;
    memcpy(out, tmp, (size_t)n * sizeof *out);
    return n;
}

/* ---- release ----------------------------------------------------------- */

/* holding: set (under the lock) when an object loaded its tables or DWARF
 * or opened its debug file since the last release; read without the lock
 * first, so that a request that symbolized nothing does not take it. */

void symbols_release(void)
{
    if (!__atomic_load_n(&holding, __ATOMIC_RELAXED))
        return;
    symbols_lock();
    for (size_t i = 0; i < nobjects; i++) {
        symbols_elf_unload(objects[i]);
        /* Keyed by the addresses of mangled strings that just went away. */
        names_free(objects[i]);
    }
    if (cache_used >= CACHE_BYTES - CACHE_BYTES / 8 ||
        cache_count >= CACHE_SLOTS / 2 - CACHE_SLOTS / 16)
        cache_clear();
    __atomic_store_n(&holding, 0, __ATOMIC_RELAXED);
    symbols_unlock();
}

FORK_PATH void symbols_fork_child(void)
{
    /* Taken, or about to be, by a thread that did not come along. */
    if (__atomic_load_n(&lock_users, __ATOMIC_SEQ_CST) == 0)
        return;
    lock_users = 0;
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&lock, &fresh, sizeof lock);
    slots = NULL;
    nslots = 0;
    by_addr = NULL;
    objects = NULL;
    nobjects = 0;
    refreshed = 0;
    seen_generation = 0;
    exe_path = NULL;
    main_path = NULL;
    cache = NULL;
    cache_count = cache_used = 0;
    holding = 0;
}
