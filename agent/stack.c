/*
 * Stack capture outside signal context: threadcreate, heap and contention
 * samples call stack_capture() from inside an interposed call, on the host's
 * thread, with the reentrancy guard entered (libunwind may allocate through
 * the loader, which must not come back into the hooks as a sample).
 *
 * The agent's own frames (the interposer and this file) are stripped, so a
 * stack starts at the host's caller, and every frame is a return address
 * turned into the call site (minus one), as pprof expects of a proto.
 */
#include "agent/agent.h"
#include "agent/symbols.h"

#include <dlfcn.h>
#include <link.h>

#include "agent/unwinder.h"

uintptr_t stack_self_start, stack_self_end;

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t base = (uintptr_t)data;
    if (info->dlpi_addr != base)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            stack_self_start = base + ph->p_vaddr;
            stack_self_end = stack_self_start + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

void stack_init(void)
{
    unwinder_load();
    Dl_info info;
    if (dladdr((void *)stack_init, &info) && info.dli_fbase)
        dl_iterate_phdr(find_self, info.dli_fbase);
    /* The first unwind initializes libunwind's caches; do it here, in a
     * quiet moment, rather than inside the first sampled call. */
    uintptr_t pcs[8];
    stack_capture(pcs, 8);
}

static inline int is_self(uintptr_t pc)
{
    return pc >= stack_self_start && pc < stack_self_end;
}

/* Returns 0 (no stack) without libunwind, inside a dl_iterate_phdr callback
 * and while a fork is being prepared. */
int stack_capture(uintptr_t *pcs, int max)
{
    void *raw[STACK_MAX + 32];
    int want = max + 32 < (int)(sizeof raw / sizeof raw[0])
                   ? max + 32
                   : (int)(sizeof raw / sizeof raw[0]);
    /* Inside a dl_iterate_phdr callback this thread holds the loader lock,
     * which libunwind may need while another capture holds libunwind's
     * cache lock and waits for the loader: no stack rather than a cycle. */
    if (!unwinder.backtrace || agent_tls.in_loader)
        return 0;
    if (!stack_unwind_enter())
        return 0; /* a fork is being prepared: agent/stack_fork.c */
    int n = unwinder.backtrace(raw, want);
    stack_unwind_leave();
    if (n <= 0)
        return 0;
    int full = n == want;
    int i = 0;
    while (i < n && is_self((uintptr_t)raw[i]))
        i++;
    int out = 0;
    for (; i < n && out < max; i++) {
        uintptr_t pc = (uintptr_t)raw[i];
        if (pc == 0)
            break;
        pcs[out++] = pc - 1;
    }
    if ((i < n || full) && out > 0) {
        pcs[out - 1] = FRAME_TRUNCATED;
    }
    return out;
}
