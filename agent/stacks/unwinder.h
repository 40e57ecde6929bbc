/*
 * libunwind, loaded privately (agent/stacks/unwinder.c). The agent does not link
 * against libunwind: libunwind.so.8 also exports unversioned _Unwind_*
 * functions, and in the host's global scope they would take C++ exceptions
 * and pthread_exit's forced unwinding away from libgcc whenever the host
 * does not itself link libgcc_s first (crashes seen with pthread_exit
 * through a C++ destructor). It is dlopen'ed with RTLD_LOCAL instead and
 * called through these pointers; its own calls to dl_iterate_phdr and
 * pthread_mutex_lock still reach the agent's interposers.
 */
#ifndef PPROF_UNWINDER_H
#define PPROF_UNWINDER_H

#include <stdint.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

struct unwinder {
    int (*backtrace)(void **buf, int size);
    int (*getcontext)(unw_context_t *ctx);
    int (*init_local)(unw_cursor_t *c, unw_context_t *ctx);
    int (*init_local2)(unw_cursor_t *c, unw_context_t *ctx, int flag);
    int (*step)(unw_cursor_t *c);
    int (*get_reg)(unw_cursor_t *c, unw_regnum_t reg, unw_word_t *val);
    int (*set_caching_policy)(unw_addr_space_t as, unw_caching_policy_t p);
    void (*flush_cache)(unw_addr_space_t as, unw_word_t lo, unw_word_t hi);
    unw_addr_space_t *local_addr_space;
    /* libunwind's whole mapping (code and data, where its locks live). */
    uintptr_t lo, hi;
    /* libunwind's thread-local storage (the fast walk's per-thread cache
     * pointer): its module id, 0 when it has none. Being dlopen'ed, each
     * thread's block is allocated through malloc on first use. */
    size_t tls_module;
};

/* Every pointer set, or (libunwind missing) all NULL: then nothing is
 * unwound and stacks keep their PC only. Read-only after unwinder_load. */
extern struct unwinder unwinder;

/* Loads libunwind once (idempotent); 0 or -1 (one line logged). Not
 * async-signal-safe; called from the constructor before any capture. */
int unwinder_load(void);

/* Allocates the calling thread's block of libunwind's thread-local
 * storage now, if it has none (through the C library, which calls malloc).
 * Only where the thread holds no allocator lock. Not async-signal-safe. */
void unwinder_tls_prepare(void);

/* 1 when addr lies in libunwind's mapping (one of its own locks).
 * Async-signal-safe. Does not allocate. */
static inline int unwinder_owns(const void *addr)
{
    return (uintptr_t)addr - unwinder.lo < unwinder.hi - unwinder.lo;
}

#endif
