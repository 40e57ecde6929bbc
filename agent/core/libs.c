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
 * dump writer, unit tests); once, under a pthread_once.
 */
#define PPROF_LIBS_SELF
#include "agent/libs.h"

#include "agent/agent.h"

#include <dlfcn.h>
#include <pthread.h>

struct libs libs_fn;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded = -1;

static void load(void)
{
    int mode = RTLD_NOW | RTLD_LOCAL;
    /* ASan and TSan abort on RTLD_DEEPBIND. */
    if (!dlsym(RTLD_DEFAULT, "__asan_init") &&
        !dlsym(RTLD_DEFAULT, "__tsan_init"))
        mode |= RTLD_DEEPBIND;
    void *h = dlopen(LIBS_SONAME, mode);
    if (!h) {
        log_info("cannot load libdw.so.1 (symbols and compression): %s",
                  dlerror());
        return;
    }
#define LIBS_RESOLVE(name)                                                 \
    if (!(libs_fn.name = (__typeof__(libs_fn.name))dlsym(h, #name))) {     \
        log_info("libdw.so.1 and its libraries lack %s", #name);          \
        return;                                                            \
    }
    LIBS_FUNCTIONS(LIBS_RESOLVE)
#undef LIBS_RESOLVE
    libs_fn.elf_version(EV_CURRENT);
    loaded = 0;
}

int libs_load(void)
{
    pthread_once(&once, load);
    return loaded;
}
