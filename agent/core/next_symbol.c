/*
 * The next definition of a name after the agent: what dlsym(RTLD_NEXT,
 * name) returns, read straight from the GNU hash tables of the objects
 * loaded after the agent, the way the loader itself looks names up.
 *
 * Why not dlsym: every process the agent is preloaded into resolves about
 * sixty names at start, and dlsym spends ~700 instructions on each, most
 * of them in its lock and its error catching (callgrind on /bin/true: 44,600
 * of the 88,000 instructions an exec'd descendant pays beyond a
 * forwarding-only preload). Here a name costs a hash, a bloom-filter test
 * per object and one string comparison. Nothing is locked or allocated;
 * the first call keeps where each object's tables are (a caller that finds
 * them being kept reads its own): async-signal-safe.
 *
 * Which objects: those after the agent in the loader's list. For a
 * preloaded agent that is the list dlsym's RTLD_NEXT searches: the other
 * preloads, then the program's libraries in load order (objects a program
 * dlopens later join its end, where RTLD_NEXT would not look; the names
 * asked for here are the C library's, found long before). The rule for
 * versions is the loader's for a lookup without a version: a definition
 * without a version wins; otherwise the one default (non-hidden) version,
 * when there is exactly one.
 *
 * It runs before anything else of the agent's, and inside other
 * libraries' start-up (a sanitizer's runtime calls dl_iterate_phdr while
 * it starts, before its own interceptors of strcmp or memset can forward):
 * it calls no C-library function but dlsym, whose fallback it is
 * (docs/signals-and-cancellation.md, "Before the constructor").
 *
 * Whenever it cannot answer exactly as dlsym would (the agent not in the
 * list, or loaded after the C library, i.e. dlopen'ed; an object without a
 * GNU hash table; a name not found; an IFUNC or thread-local definition;
 * another loader than glibc's, whose list it cannot read) it asks dlsym,
 * which then takes its lock as before.
 */
#include "agent/core/next_symbol.h"

#include "agent/compiler.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>

extern ElfW(Dyn) _DYNAMIC[] __attribute__((visibility("hidden")));

/* glibc's loader's list of objects, a weak reference: musl's loader has
 * none, resolves the name to 0 instead of refusing to load the agent, and
 * the agent then stands aside (loader_is_glibc). */
#pragma weak _r_debug

STARTUP int loader_is_glibc(void)
{
    return &_r_debug != NULL;
}

struct object_tables {
    const uint32_t *gnu_hash;
    const ElfW(Sym) *symtab;
    const char *strtab;
    const ElfW(Half) *versym;
};

/* The loader rewrites the addresses in a writable dynamic section to
 * absolute ones; a read-only one (the vDSO's) keeps offsets. */
static const void *dyn_address(const struct link_map *l, ElfW(Addr) p)
{
    return (const void *)(p < l->l_addr ? p + l->l_addr : p);
}

STARTUP static int tables_of(const struct link_map *l, struct object_tables *t)
{
    t->gnu_hash = NULL;
    t->symtab = NULL;
    t->strtab = NULL;
    t->versym = NULL;
    for (const ElfW(Dyn) *d = l->l_ld; d && d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_GNU_HASH: t->gnu_hash = dyn_address(l, d->d_un.d_ptr); break;
        case DT_SYMTAB: t->symtab = dyn_address(l, d->d_un.d_ptr); break;
        case DT_STRTAB: t->strtab = dyn_address(l, d->d_un.d_ptr); break;
        case DT_VERSYM: t->versym = dyn_address(l, d->d_un.d_ptr); break;
        }
    }
    return t->gnu_hash && t->symtab && t->strtab ? 0 : -1;
}

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

/* 1 when the two names are the same. Not strcmp: a sanitizer's runtime
 * (or another preload) defines strcmp before the C library, and runs its
 * own start-up, dl_iterate_phdr included, before its strcmp can forward
 * anywhere (AddressSanitizer's calls a NULL pointer then). This file calls
 * no C-library function but dlsym, and the Makefile keeps the compiler
 * from making calls of its loops (-fno-tree-loop-distribute-patterns). */
static int same_name(const char *a, const char *b)
{
    for (; *a == *b; a++, b++)
        if (*a == '\0')
            return 1;
    return 0;
}

enum { NOT_HERE, FOUND, ASK_DLSYM };

/* A definition the loader would take for a lookup without a version:
 * FOUND with *sym set, NOT_HERE, or ASK_DLSYM for IFUNC and TLS. */
STARTUP static int pick(const struct object_tables *t, const char *name, uint32_t h,
                const ElfW(Sym) **sym)
{
    const uint32_t *gh = t->gnu_hash;
    uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
    uint32_t shift = gh[3];
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gh + 4);
    const unsigned bits = sizeof(ElfW(Addr)) * 8;
    ElfW(Addr) word = bloom[(h / bits) & (bloom_size - 1)];
    ElfW(Addr) mask = ((ElfW(Addr))1 << (h % bits)) |
                      ((ElfW(Addr))1 << ((h >> shift) % bits));
    if ((word & mask) != mask)
        return NOT_HERE;
    const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
    const uint32_t *chain = buckets + nbuckets - symoffset;
    uint32_t i = buckets[h % nbuckets];
    const ElfW(Sym) *versioned = NULL;
    int nversioned = 0;
    for (; i != 0; i++) {
        const ElfW(Sym) *s = &t->symtab[i];
        if (((chain[i] ^ h) >> 1) == 0 && s->st_shndx != SHN_UNDEF &&
            ELF64_ST_BIND(s->st_info) != STB_LOCAL &&
            same_name(t->strtab + s->st_name, name)) {
            int type = ELF64_ST_TYPE(s->st_info);
            if (type == STT_GNU_IFUNC || type == STT_TLS)
                return ASK_DLSYM;
            ElfW(Half) v = t->versym ? t->versym[i] : 1;
            if ((v & 0x7fff) < 2) {
                *sym = s;
                return FOUND;
            }
            if (!(v & 0x8000) && nversioned++ == 0)
                versioned = s;
        }
        if (chain[i] & 1)
            break;
    }
    if (nversioned == 1) {
        *sym = versioned;
        return FOUND;
    }
    return NOT_HERE;
}

STARTUP static const struct link_map *self_map(void)
{
    if (!loader_is_glibc())
        return NULL;
    const struct link_map *l = _r_debug.r_map;
    for (; l; l = l->l_next)
        if (l->l_ld == _DYNAMIC)
            return l;
    return NULL;
}

/* The first objects searched, read once (those after the agent in the
 * list the first time this runs); any beyond them are read at each
 * search. A caller that finds them being read (another thread, or a
 * signal handler on this one) reads them all for itself. */
enum { CACHED = 16 };
struct searched {
    const struct link_map *map;
    struct object_tables t;
};
static struct searched cached[CACHED] __attribute__((aligned(8))) LOAD_STATE;
static int ncached = -1; /* -1 unread, -2 being read, -3 unusable */

STARTUP static int read_cached(void)
{
    const struct link_map *self = self_map();
    if (!self)
        return -3;
    int n = 0;
    for (const struct link_map *l = self->l_next; l && n < CACHED;
         l = l->l_next) {
        if (tables_of(l, &cached[n].t) != 0)
            return -3;
        cached[n++].map = l;
    }
    return n;
}

/* FOUND, NOT_HERE or ASK_DLSYM for one object, with the address. */
STARTUP static int look_in(const struct link_map *l, const struct object_tables *t,
                   const char *name, uint32_t h, void **addr)
{
    const ElfW(Sym) *sym = NULL;
    int r = pick(t, name, h, &sym);
    if (r == FOUND)
        *addr = (void *)(l->l_addr + sym->st_value);
    return r;
}

/* The first definition of name in l and the objects after it in the
 * loader's list; NULL when there is none, or to leave it to dlsym. */
STARTUP static void *look_from(const struct link_map *l, const char *name,
                               uint32_t h)
{
    void *addr = NULL;
    for (; l; l = l->l_next) {
        struct object_tables t;
        if (tables_of(l, &t) != 0)
            return NULL;
        switch (look_in(l, &t, name, h, &addr)) {
        case FOUND: return addr;
        case ASK_DLSYM: return NULL;
        }
    }
    return NULL;
}

/* The address, or NULL to leave the question to dlsym. */
STARTUP static void *fast_next(const char *name)
{
    int n = __atomic_load_n(&ncached, __ATOMIC_ACQUIRE);
    int unread = -1;
    if (n == -1 && __atomic_compare_exchange_n(&ncached, &unread, -2, 0,
                                               __ATOMIC_ACQ_REL,
                                               __ATOMIC_ACQUIRE)) {
        n = read_cached();
        __atomic_store_n(&ncached, n, __ATOMIC_RELEASE);
    }
    if (n == -3)
        return NULL;
    uint32_t h = gnu_hash(name);
    void *addr = NULL;
    for (int i = 0; i < n; i++)
        switch (look_in(cached[i].map, &cached[i].t, name, h, &addr)) {
        case FOUND: return addr;
        case ASK_DLSYM: return NULL;
        }
    /* Then those not cached (or all, while the cache is being read). */
    const struct link_map *l = n > 0 ? cached[n - 1].map : self_map();
    return look_from(l ? l->l_next : NULL, name, h);
}

/* 1 when the C library comes after the agent in the list (preloaded);
 * 0 when it comes before (dlopen'ed), where RTLD_NEXT means the agent's
 * own dependencies rather than what follows it in the list. */
STARTUP static int preloaded(void)
{
    static int answer = -1;
    int a = __atomic_load_n(&answer, __ATOMIC_RELAXED);
    if (a < 0) {
        a = fast_next("__libc_start_main") != NULL;
        __atomic_store_n(&answer, a, __ATOMIC_RELAXED);
    }
    return a;
}

/* The definition the process's global lookup finds first: the objects
 * from the start of the loader's list (the program, the preloads, their
 * libraries), the agent among them. NULL to leave it to dlsym. */
STARTUP static void *fast_first(const char *name)
{
    if (!loader_is_glibc())
        return NULL;
    return look_from(_r_debug.r_map, name, gnu_hash(name));
}

STARTUP void *first_symbol(const char *name)
{
    void *p = fast_first(name);
    return p ? p : dlsym(RTLD_DEFAULT, name);
}

STARTUP void *next_symbol_fast(const char *name)
{
    return preloaded() ? fast_next(name) : NULL;
}

STARTUP void *next_symbol(const char *name)
{
    void *p = next_symbol_fast(name);
    return p ? p : dlsym(RTLD_NEXT, name);
}
