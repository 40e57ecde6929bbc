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
#include "agent/cfi.h"
#include "agent/symbols.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>

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

/* The walks of stack_capture_no_alloc may be fast: see stack_init. */
static int fast_when_locked;

unsigned stack_loader_epoch = 1;

void stack_init(void)
{
    cfi_stack_learn();
    cfi_tables_refresh();
    unwinder_load();
    Dl_info info;
    if (dladdr((void *)stack_init, &info) && info.dli_fbase)
        dl_iterate_phdr(find_self, info.dli_fbase);
    /* The first unwind initializes libunwind's caches; do it here, in a
     * quiet moment, rather than inside the first sampled call. */
    uintptr_t pcs[8];
    stack_capture(pcs, 8);
    /* That unwind created libunwind's thread-specific key, the lowest free
     * one: a key created now is above it. Below 32, setting a thread's
     * value allocates nothing (the C library keeps the first 32 in the
     * thread itself), so a thread's first fast walk allocates only its
     * thread-local block, which stack_thread_prepare() takes care of. */
    pthread_key_t probe;
    if (pthread_key_create(&probe, NULL) == 0) {
        fast_when_locked = probe < 32;
        pthread_key_delete(probe);
    }
}

static inline int is_self(uintptr_t pc)
{
    return pc >= stack_self_start && pc < stack_self_end;
}

/*
 * Why two ways to walk. unw_backtrace is the fast one: it remembers each
 * frame's layout in a cache of the calling thread, found through libunwind's
 * thread-local storage. libunwind is dlopen'ed (agent/unwinder.h), so that
 * storage is dynamic: a thread's first use allocates its block through the
 * host's malloc (__tls_get_addr). The first use after a dlclose may free
 * the thread's block of the unloaded object too, in C libraries that bring
 * a thread's blocks up to date with every load and unload at once (glibc
 * 2.36 only goes as far as libunwind's own load: it frees nothing then,
 * measured). Done while the thread holds one of its allocator's locks,
 * either waits on the thread itself (seen with jemalloc: a contended lock
 * inside malloc, then the contention sample's capture). So a capture that
 * may be inside the allocator walks fast only when the thread's block is
 * known to be there and no dlclose came since; otherwise walk_uncached
 * uses libunwind's step-by-step unwinder, which keeps no thread-local
 * state.
 */
static __attribute__((noinline)) int walk_uncached(void **raw, int want)
{
    unw_context_t ctx;
    unw_cursor_t cursor;
    unwinder.getcontext(&ctx);
    if (unwinder.init_local(&cursor, &ctx) != 0)
        return 0;
    int n = 0;
    while (n < want) {
        unw_word_t ip;
        if (unwinder.get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0)
            break;
        raw[n++] = (void *)ip;
        if (unwinder.step(&cursor) <= 0)
            break;
    }
    return n;
}

void stack_thread_prepare(void)
{
    cfi_stack_learn();
    if (!unwinder.backtrace)
        return;
    /* Read first: a dlclose meanwhile leaves this thread not readied. */
    unsigned epoch = __atomic_load_n(&stack_loader_epoch, __ATOMIC_SEQ_CST);
    unwinder_tls_prepare();
    agent_tls.unwind_epoch = epoch;
}

void stack_loader_changing(void)
{
    __atomic_fetch_add(&stack_loader_epoch, 1, __ATOMIC_SEQ_CST);
    /* Walks that began before the bump may still walk fast. Inside a
     * dl_iterate_phdr callback one of them may wait for the loader lock
     * this thread holds: not waited for (a window left open). */
    if (agent_tls.in_loader)
        return;
    while (__atomic_load_n(&stack_unwinders, __ATOMIC_SEQ_CST) >
           agent_tls.unwinding)
        sched_yield();
}

/* Returns 0 (no stack) without libunwind, inside a dl_iterate_phdr callback
 * and while a fork is being prepared. */
static int capture(uintptr_t *pcs, int max, int may_allocate)
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
    /* After the enter: a dlclose either sees this thread inside, or has
     * bumped the epoch before this read (stack_loader_changing). */
    unsigned epoch = __atomic_load_n(&stack_loader_epoch, __ATOMIC_SEQ_CST);
    int n;
    if (may_allocate) {
        n = unwinder.backtrace(raw, want);
        agent_tls.unwind_epoch = epoch;
    } else if (fast_when_locked && agent_tls.unwind_epoch == epoch) {
        n = unwinder.backtrace(raw, want);
    } else {
        n = walk_uncached(raw, want);
    }
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

int stack_capture(uintptr_t *pcs, int max)
{
    return capture(pcs, max, 1);
}

int stack_capture_no_alloc(uintptr_t *pcs, int max)
{
    return capture(pcs, max, 0);
}
