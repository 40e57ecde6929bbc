/*
 * The floor of interposition, for the heap bench (test/bench/heap.sh): a
 * preload library that interposes the same malloc family as the agent and
 * only forwards each call to the next allocator, found with
 * dlsym(RTLD_NEXT). No counting, no sampling, no filter: what any
 * interposer pays for being between the program and its allocator (one
 * more call layer, an indirect jump through a pointer known at run time).
 *
 * Each entry point compiles to one `jmp *real_x(%rip)` once resolved.
 * Before that, every pointer leads to a stub that resolves them all; calls
 * made while dlsym itself runs go to glibc's __libc_* entry points, so the
 * shim is meant to sit in front of glibc (as the bench uses it). Not part
 * of the agent; never installed.
 */
#include <dlfcn.h>
#include <malloc.h>
#include <stddef.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static void *stub_malloc(size_t n);
static void stub_free(void *p);
static void *stub_calloc(size_t a, size_t b);
static void *stub_realloc(void *p, size_t n);

static void *(*real_malloc)(size_t) = stub_malloc;
static void (*real_free)(void *) = stub_free;
static void *(*real_calloc)(size_t, size_t) = stub_calloc;
static void *(*real_realloc)(void *, size_t) = stub_realloc;
static void *(*real_reallocarray)(void *, size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static size_t (*real_usable_size)(void *);

static int resolving;

static void *next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

/* Resolves every real_* pointer; 0 when done, -1 when called again from
 * inside dlsym (the caller then uses glibc's entry point). The bench's
 * programs make their first allocation on one thread, so no lock. */
static int resolve(void)
{
    if (real_malloc != stub_malloc)
        return 0;
    if (resolving)
        return -1;
    resolving = 1;
    void *m = next("malloc");
    void *f = next("free");
    void *c = next("calloc");
    void *r = next("realloc");
    real_reallocarray = (void *(*)(void *, size_t, size_t))next("reallocarray");
    real_posix_memalign =
        (int (*)(void **, size_t, size_t))next("posix_memalign");
    real_aligned_alloc = (void *(*)(size_t, size_t))next("aligned_alloc");
    real_memalign = (void *(*)(size_t, size_t))next("memalign");
    real_valloc = (void *(*)(size_t))next("valloc");
    real_pvalloc = (void *(*)(size_t))next("pvalloc");
    real_usable_size = (size_t (*)(void *))next("malloc_usable_size");
    real_free = f ? (void (*)(void *))f : __libc_free;
    real_calloc = c ? (void *(*)(size_t, size_t))c : __libc_calloc;
    real_realloc = r ? (void *(*)(void *, size_t))r : __libc_realloc;
    real_malloc = m ? (void *(*)(size_t))m : __libc_malloc;
    resolving = 0;
    return 0;
}

__attribute__((constructor)) static void forward_shim_init(void)
{
    resolve();
}

static void *stub_malloc(size_t n)
{
    return resolve() == 0 ? real_malloc(n) : __libc_malloc(n);
}
static void stub_free(void *p)
{
    if (resolve() == 0)
        real_free(p);
    else
        __libc_free(p);
}
static void *stub_calloc(size_t a, size_t b)
{
    return resolve() == 0 ? real_calloc(a, b) : __libc_calloc(a, b);
}
static void *stub_realloc(void *p, size_t n)
{
    return resolve() == 0 ? real_realloc(p, n) : __libc_realloc(p, n);
}

EXPORT void *malloc(size_t n)
{
    return real_malloc(n);
}
EXPORT void free(void *p)
{
    real_free(p);
}
EXPORT void *calloc(size_t a, size_t b)
{
    return real_calloc(a, b);
}
EXPORT void *realloc(void *p, size_t n)
{
    return real_realloc(p, n);
}

/* The rarer ones resolve on their first call. */
EXPORT void *reallocarray(void *p, size_t a, size_t b)
{
    resolve();
    return real_reallocarray(p, a, b);
}
EXPORT int posix_memalign(void **pp, size_t align, size_t n)
{
    resolve();
    return real_posix_memalign(pp, align, n);
}
EXPORT void *aligned_alloc(size_t align, size_t n)
{
    resolve();
    return real_aligned_alloc(align, n);
}
EXPORT void *memalign(size_t align, size_t n)
{
    if (resolve() != 0)
        return __libc_memalign(align, n);
    return real_memalign(align, n);
}
EXPORT void *valloc(size_t n)
{
    resolve();
    return real_valloc(n);
}
EXPORT void *pvalloc(size_t n)
{
    resolve();
    return real_pvalloc(n);
}
EXPORT size_t malloc_usable_size(void *p)
{
    resolve();
    return real_usable_size(p);
}
