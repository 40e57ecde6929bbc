/*
 * Loads libunwind privately: see agent/stacks/unwinder.h for why. The names are
 * those libunwind.h maps the unw_* calls to for local-only unwinding
 * (_ULx86_64_step, ...), taken from the header's own macros.
 */
#include "agent/stacks/unwinder.h"

#include "agent/host/fds.h"
#include "agent/log.h"
#include "agent/stacks/objects.h"
#include "agent/core/loader.h"

#include <dlfcn.h>

struct unwinder unwinder;

#define NAME_OF(x) NAME_OF_(x)
#define NAME_OF_(x) #x

int unwinder_load(void)
{
    static int state; /* 0: not tried, 1: loaded, -1: failed */
    if (state)
        return state > 0 ? 0 : -1;
    state = -1;
    void *h = loader_open("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        log_info("cannot load libunwind.so.8 (%s): stacks keep their "
                 "sampled address only", dlerror());
        return -1;
    }
    struct unwinder u;
    u.backtrace = (int (*)(void **, int))loader_sym(h, NAME_OF(unw_backtrace));
    u.getcontext = (int (*)(unw_context_t *))loader_sym(h, NAME_OF(unw_tdep_getcontext));
    u.init_local = (int (*)(unw_cursor_t *, unw_context_t *))loader_sym(
        h, NAME_OF(unw_init_local));
    u.init_local2 = (int (*)(unw_cursor_t *, unw_context_t *, int))loader_sym(
        h, NAME_OF(unw_init_local2));
    u.step = (int (*)(unw_cursor_t *))loader_sym(h, NAME_OF(unw_step));
    u.get_reg = (int (*)(unw_cursor_t *, unw_regnum_t, unw_word_t *))loader_sym(
        h, NAME_OF(unw_get_reg));
    u.set_caching_policy = (int (*)(unw_addr_space_t, unw_caching_policy_t))
        loader_sym(h, NAME_OF(unw_set_caching_policy));
    u.flush_cache = (void (*)(unw_addr_space_t, unw_word_t, unw_word_t))loader_sym(
        h, NAME_OF(unw_flush_cache));
    u.local_addr_space = (unw_addr_space_t *)loader_sym(
        h, NAME_OF(unw_local_addr_space));
    if (!u.backtrace || !u.getcontext || !u.init_local || !u.init_local2 ||
        !u.step || !u.get_reg || !u.set_caching_policy || !u.flush_cache ||
        !u.local_addr_space) {
        log_info("libunwind.so.8 lacks the functions the agent needs: "
                 "stacks keep their sampled address only");
        return -1;
    }
    /* Its memory-validation pipe is the agent's own (agent/host/fds.c). */
    fds_own_library((const void *)u.step);
    size_t module = 0;
    if (loader_info(h, RTLD_DI_TLS_MODID, &module) != 0)
        module = 0;
    u.tls_module = module;
    /* Not found: 0, 0, it owns nothing. */
    object_range_of((const void *)u.step, &u.lo, &u.hi);
    unwinder = u;
    state = 1;
    return 0;
}

/* The C library's entry for a general-dynamic TLS access: the address of
 * (module, offset) in the calling thread's block, allocated if need be.
 * glibc's loader defines it. A weak reference: as the agent's only strong
 * reference to the loader itself, it made ld-linux-x86-64.so.2 a
 * dependency, which musl's loader cannot find (it refused the program);
 * under musl the agent stands aside and never gets here. */
struct tls_index {
    unsigned long module, offset;
};
extern void *__tls_get_addr(struct tls_index *ti) __attribute__((weak));

void unwinder_tls_prepare(void)
{
    if (unwinder.tls_module) {
        struct tls_index ti = {unwinder.tls_module, 0};
        __tls_get_addr(&ti);
    }
}
