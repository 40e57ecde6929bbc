/*
 * The agent's own copies of libdw, libelf, zlib and liblzma.
 *
 * Linked as ordinary dependencies, their functions were bound like any
 * other name: the executable first. varnishd exports its own zlib
 * (deflate, deflateInit2_, deflateEnd, built with other options), and the
 * agent's compression ran on it: every protobuf profile answered 500. The
 * same holds for libdw's own calls into libelf and zlib, and for any
 * program that exports ELF or compression functions (-rdynamic, a library
 * built in). Debian's static archives of these libraries are not
 * position-independent (libz.a, libelf.a, libdw.a), so they cannot be
 * linked into the agent with their names hidden.
 *
 * So the agent does not link them. The first caller loads libdw
 * (bringing libelf, zlib, liblzma and libbz2 as its dependencies) with
 * RTLD_LOCAL | RTLD_DEEPBIND: each of those objects looks its names up
 * among themselves before the process's global names, and the agent takes
 * its functions from that handle with dlsym, which never looks at the
 * executable. A process that has libdw loaded already (it uses it itself)
 * gets that copy, bound as the host bound it.
 *
 * Consequences: libdw and libelf allocate with the C library's malloc
 * directly (the allocation profile never saw them: the agent's own
 * threads are not sampled); a process that never asks for a profile never
 * maps them (a smaller start for short-lived processes). Under a sanitizer
 * runtime, which refuses RTLD_DEEPBIND, the libraries are loaded without it.
 *
 * Contexts: any thread outside signal handlers (the HTTP workers, the
 * dump writer, unit tests); loaded once, under a lock, and tried again by
 * a later caller when it failed (a few tries each time).
 */
#define PPROF_LIBS_SELF
#include "agent/core/libs.h"

#include "agent/log.h"
#include "agent/spinlock.h"
#include "agent/core/loader.h"

#include <dlfcn.h>

struct libs libs_fn;

/* 0 once loaded; -1 until then. Written under load_lock (a spinlock: one
 * held in the parent at fork time is taken over in the child). */
static spinlock_t load_lock;
static int loaded = -1;
static int failures_said;

/* Tries once; returns the handle with every function resolved, or NULL
 * with *why set. */
static void *try_load(int mode, const char **why)
{
    void *h = loader_open(LIBS_SONAME, mode);
    if (!h) {
        *why = dlerror();
        return NULL;
    }
#define LIBS_RESOLVE(name)                                                 \
    if (!(libs_fn.name = (__typeof__(libs_fn.name))loader_sym(h, #name))) {     \
        *why = "a function is missing: " #name;                           \
        return NULL;                                                       \
    }
    LIBS_FUNCTIONS(LIBS_RESOLVE)
#undef LIBS_RESOLVE
    return h;
}

/* A few tries: a program that sweeps its descriptors (close_range, dup2
 * over low numbers) can close or replace the loader's descriptor of the
 * file while it reads it, and the next try finds it whole. */
static void load(void)
{
    int mode = RTLD_NOW | RTLD_LOCAL;
    /* ASan and TSan abort on RTLD_DEEPBIND. */
    if (!loader_sym(RTLD_DEFAULT, "__asan_init") &&
        !loader_sym(RTLD_DEFAULT, "__tsan_init"))
        mode |= RTLD_DEEPBIND;
    const char *why = "";
    for (int i = 0; i < 4; i++) {
        if (try_load(mode, &why)) {
            libs_fn.elf_version(EV_CURRENT);
            __atomic_store_n(&loaded, 0, __ATOMIC_RELEASE);
            return;
        }
    }
    if (!failures_said++)
        log_info("cannot load %s (symbols and compression): %s", LIBS_SONAME,
                 why ? why : "");
}

int libs_load(void)
{
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE) == 0)
        return 0;
    spin_lock(&load_lock);
    if (loaded != 0)
        load(); /* a failed load is tried again by the next caller */
    int r = loaded;
    spin_unlock(&load_lock);
    return r;
}
