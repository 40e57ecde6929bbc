/*
 * Stack capture outside signal context: threadcreate, heap, contention and
 * custom-profile samples call stack_capture() from inside an interposed
 * call, on the host's thread, with the reentrancy guard entered. The walk
 * is the table-driven one (agent/stacks/cfi_walk.c): no lock, no allocation, no
 * system call, no call into the loader, so it is the same walk wherever
 * the thread is (inside its allocator's locks, the loader's, a fork).
 *
 * The agent's own frames (the interposer and this file) are stripped, so a
 * stack starts at the host's caller, and every frame is a return address
 * turned into the call site (minus one), as pprof expects of a proto.
 */
#include "agent/stacks/cfi.h"
#include "agent/compiler.h"
#include "agent/host/fds.h"
#include "agent/guard.h"
#include "agent/stacks/stack.h"
#include "agent/core/loader.h"
#include "agent/core/real.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

uintptr_t stack_self_start, stack_self_end;
uintptr_t stack_sigreturn_at;

void stack_note_handler(int sig)
{
#if defined(__x86_64__)
    struct sigaction cur;
    if (sigaction(sig, NULL, &cur) == 0 && cur.sa_restorer)
        __atomic_store_n(&stack_sigreturn_at, (uintptr_t)cur.sa_restorer,
                         __ATOMIC_RELAXED);
#else
    (void)sig; /* the trampoline is the vDSO's: not skipped there yet */
#endif
}

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
    cfi_stack_learn();
    /* The first build of the unwind tables is the process shell's to
     * schedule (init.c: now, or after the start delay). */
    Dl_info info;
    if (loader_addr((void *)stack_init, &info) && info.dli_fbase)
        loader_iterate_phdr(find_self, info.dli_fbase);
}

void stack_thread_prepare(void)
{
    cfi_stack_learn();
}

/* Parses "start-end ..." at p; 1 when sp lies in [start, end). */
static int maps_line_holds(const char *p, uintptr_t sp, uintptr_t *lo,
                           uintptr_t *hi)
{
    uintptr_t a = 0, b = 0;
    while (*p && *p != '-') {
        int c = *p++;
        a = a * 16 + (uintptr_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (*p++ != '-')
        return 0;
    while (*p && *p != ' ') {
        int c = *p++;
        b = b * 16 + (uintptr_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (sp < a || sp >= b)
        return 0;
    *lo = a;
    *hi = b;
    return 1;
}

/* Reads of /proc/self/maps one thread may make: a stack in no mapping, or a
 * process out of descriptors, must not cost an open and a read on every
 * capture for the rest of the thread's life. */
#define MAPS_TRIES 3
static __thread unsigned char maps_tries;

/* Calls fn(line, arg) for each line of /proc/self/maps (newline cut)
 * until fn returns non-zero. Open, read and close only; no allocation, no
 * lock. */
static void maps_each(int (*fn)(char *line, void *arg), void *arg)
{
    int fd = fds_open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return;
    char buf[4096];
    size_t have = 0;
    for (;;) {
        ssize_t n = real_read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            if (fn(line, arg))
                goto done;
            line = nl + 1;
        }
        have = (size_t)(buf + have - line); /* a line cut by the read */
        memmove(buf, line, have);
        if (have == sizeof buf - 1)
            have = 0; /* no line is that long */
    }
done:
    fds_close(fd);
}

/* learn_from_maps' line: 1 once the mapping holding *sp is found. */
static int holds_sp(char *line, void *arg)
{
    uintptr_t lo, hi;
    if (!maps_line_holds(line, *(uintptr_t *)arg, &lo, &hi))
        return 0;
    cfi_stack_lo = lo;
    cfi_stack_hi = hi;
    return 1;
}

/* The calling thread's stack bounds from the mapping that holds its stack
 * pointer (/proc/self/maps), for a thread the agent did not see start
 * (created through a pthread_create the agent's interposer never saw, as
 * jemalloc's background threads are) caught where it may not allocate:
 * pthread_getattr_np would. Open, read and close only; no allocation, no
 * lock. */
static void learn_from_maps(void)
{
    if (maps_tries >= MAPS_TRIES)
        return;
    maps_tries++;
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    maps_each(holds_sp, &sp);
}

/* The stack above the agent function whose frame record is frame (its
 * __builtin_frame_address(0)), or above this one's when frame is NULL;
 * returns 0 (no stack) when the thread's stack bounds are unknown and
 * cannot be learnt here. */
static int capture(const void *frame, uintptr_t *pcs, int max,
                   int may_allocate)
{
    uintptr_t raw[STACK_MAX + 32];
    int want = max + 32 < (int)(sizeof raw / sizeof raw[0])
                   ? max + 32
                   : (int)(sizeof raw / sizeof raw[0]);
    /* Outside the allocator's locks (and the loader's), a thread the
     * agent did not see start learns its stack, and code loaded since
     * the last refresh gets its tables. */
    if (may_allocate && !agent_tls.in_loader) {
        if (unlikely(!cfi_stack_hi))
            cfi_stack_learn();
        if (unlikely(__atomic_load_n(&cfi_tables_stale, __ATOMIC_RELAXED)))
            cfi_tables_maybe_refresh();
    } else if (!cfi_stack_hi) {
        learn_from_maps();
    }
    int full;
    int n = cfi_walk_frame(frame ? frame : __builtin_frame_address(0), raw,
                           want, &full);
    int i = 0;
    while (i < n && stack_is_self(raw[i]))
        i++;
    int out = n - i < max ? n - i : max;
    memcpy(pcs, raw + i, (size_t)out * sizeof *pcs);
    if ((i + out < n || full) && out > 0)
        pcs[out - 1] = FRAME_TRUNCATED;
    return out;
}

int stack_capture(uintptr_t *pcs, int max)
{
    return capture(NULL, pcs, max, 1);
}

int stack_capture_from(const void *frame, uintptr_t *pcs, int max)
{
    return capture(frame, pcs, max, 1);
}

int stack_capture_no_alloc(uintptr_t *pcs, int max)
{
    return capture(NULL, pcs, max, 0);
}

/* Up to 8192 mappings: a process with more keeps the lowest, and a thread
 * whose stack is beyond them is seen by its leaf alone. */
#define FOREIGN_MAX 8192
struct stack_range stack_foreign[FOREIGN_MAX];
int stack_foreign_n;

static uintptr_t hex_at(const char **p)
{
    uintptr_t v = 0;
    for (;; (*p)++) {
        int c = **p;
        if (c >= '0' && c <= '9')
            v = v * 16 + (uintptr_t)(c - '0');
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            v = v * 16 + (uintptr_t)((c | 0x20) - 'a' + 10);
        else
            return v;
    }
}

/* "start-end rw-p ..." at line: its range when writable and private. */
static int writable_range(const char *line, struct stack_range *r)
{
    const char *p = line;
    uintptr_t lo = hex_at(&p);
    if (*p++ != '-')
        return 0;
    uintptr_t hi = hex_at(&p);
    if (*p++ != ' ' || strncmp(p, "rw-p", 4) != 0 || hi <= lo)
        return 0;
    r->lo = lo;
    r->hi = hi;
    return 1;
}

/* stack_foreign_snapshot's line: a writable range kept, while room. */
static int keep_writable(char *line, void *arg)
{
    int *n = arg;
    if (*n < FOREIGN_MAX && writable_range(line, &stack_foreign[*n]))
        (*n)++;
    return 0;
}

void stack_foreign_snapshot(void)
{
    int n = 0;
    maps_each(keep_writable, &n);
    __atomic_store_n(&stack_foreign_n, n, __ATOMIC_RELEASE);
}
