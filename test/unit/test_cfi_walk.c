/*
 * The table-driven walker (agent/stacks/cfi_walk.c) against libunwind, from the
 * same call sites: -O2 code with and without frame pointers in shared
 * objects dlopen'ed (and dlclose'd: their tables go), frames of run-time
 * size, deep recursion, the C library's qsort calling back, a signal
 * handler (walked through the signal frame, and from the handler's
 * ucontext, interrupting a call or a plain instruction), on the main
 * thread and another. Every stack must equal libunwind's frame for frame;
 * the agreement is printed. Then what the walker must never do: allocate,
 * make a system call (counted under a seccomp filter that traps every
 * one, with libunwind as the control that does make some), or fault on a
 * garbage stack.
 */
#include "agent/stacks/cfi.h"
#include "agent/stacks/objects.h"
#include "agent/stacks/unwinder.h"
#include "harness.h"
#include "in_use.h"

#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define FRAMES 400

typedef void (*walk_cb)(void);
struct lib {
    const char *file;
    void *handle;
    int (*recurse)(int depth, walk_cb cb);
    int (*sort)(walk_cb cb);
    int (*raise_sig)(int sig);
    int (*spin)(volatile int *stop);
};

static struct lib libs[4] = {{"libwalk_nofp.so", NULL, NULL, NULL, NULL, NULL},
                             {"libwalk_fp.so", NULL, NULL, NULL, NULL, NULL},
                             {"libwalk_late.so", NULL, NULL, NULL, NULL, NULL},
                             {"libwalk_dbg.so", NULL, NULL, NULL, NULL, NULL}};
static char dir[4096];

static struct {
    long stacks, same_stacks, frames, same_frames;
} agree;
static const char *reference = "libunwind";

static void show(const char *who, const uintptr_t *pcs, int n)
{
    fprintf(stderr, "  %s (%d frames):\n", who, n);
    for (int i = 0; i < n; i++) {
        Dl_info di;
        const char *name = "?";
        if (dladdr((void *)pcs[i], &di) && di.dli_sname)
            name = di.dli_sname;
        fprintf(stderr, "    %#lx %s\n", (unsigned long)pcs[i], name);
    }
}

static void tally(const char *what, const uintptr_t *ours, int n_ours,
                  const uintptr_t *ref, int n_ref)
{
    int same = n_ours == n_ref;
    agree.stacks++;
    agree.frames += n_ref;
    for (int i = 0; i < n_ref; i++) {
        if (i < n_ours && ours[i] == ref[i])
            agree.same_frames++;
        else
            same = 0;
    }
    if (same) {
        agree.same_stacks++;
        return;
    }
    HARNESS_FAIL("%s: the walker's stack differs from %s's", what, reference);
    show("walker", ours, n_ours);
    show(reference, ref, n_ref);
}

static const char *current_what = "";
/* Addresses that are no code, on a stack with unreadable pages on both
 * sides: what the rule cache's 36-bit tag test lets through (addresses of
 * 2^48 - 4096 and above alias an entry or the empty one) must still read
 * only inside the bounds. A read outside faults and fails the test. */
TEST(hostile_addresses_stay_in_bounds)
{
    long page = sysconf(_SC_PAGESIZE);
    char *map = mmap(NULL, (size_t)page * 3, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    expect_true(map != MAP_FAILED);
    if (map == MAP_FAILED)
        return;
    expect_int_eq(mprotect(map, (size_t)page, PROT_NONE), 0);
    expect_int_eq(mprotect(map + 2 * page, (size_t)page, PROT_NONE), 0);
    uintptr_t *stack = (uintptr_t *)(map + page);
    size_t words = (size_t)page / sizeof *stack;
    uintptr_t text = (uintptr_t)libs[1].recurse;
    /* Fill the cache with real rules first. */
    uintptr_t warm[64];
    int full;
    cfi_walk_here(warm, 64, &full);
    const uintptr_t hostile[] = {
        0, 1, 4095, 4096, ~(uintptr_t)0, ~(uintptr_t)0 - 4096,
        (uintptr_t)0x0000fffffffff123, (uintptr_t)0x0000ffffffffffff,
        (uintptr_t)0xffff800000000000, ((uintptr_t)1 << 48) + text,
        ((uintptr_t)0xffff << 48) | text, text};
    size_t nh = sizeof hostile / sizeof hostile[0];
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int round = 0; round < 4000; round++) {
        for (size_t i = 0; i < words; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            stack[i] = x % 3 ? hostile[x % nh] + (x >> 60)
                             : (uintptr_t)&stack[x % words];
        }
        /* At the lowest word or near the top: a read under the stack
         * pointer or over the top lands on a protected page. */
        uintptr_t sp = (uintptr_t)(round & 1 ? stack
                                             : stack + words - 1 - x % 4);
        struct cfi_regs r = {hostile[round % nh] + (x >> 61), sp,
                             hostile[(round / nh) % nh], NULL};
        uintptr_t pcs[64];
        int n = cfi_walk_sites(&r, round & 2 ? 1 : 0, (uintptr_t)stack,
                               (uintptr_t)(stack + words), pcs, 64, &full);
        expect_true(n >= 1 && n <= 64);
    }
    munmap(map, (size_t)page * 3);
}

static int covered(uintptr_t pc);

/* Both walks from here; compared from this function's caller outwards
 * (each walk starts in its own call). */
__attribute__((noinline)) static void compare_here(void)
{
    void *raw[FRAMES];
    uintptr_t ref[FRAMES], ours[FRAMES];
    int full;
    int n_ref = unwinder.backtrace(raw, FRAMES);
    int n_ours = cfi_walk_here(ours, FRAMES, &full);
    uintptr_t me = (uintptr_t)__builtin_return_address(0);
    for (int i = 0; i < n_ref; i++)
        ref[i] = (uintptr_t)raw[i];
    int ir = 0, io = 0;
    while (ir < n_ref && ref[ir] != me)
        ir++;
    while (io < n_ours && ours[io] != me)
        io++;
    if (ir == n_ref || io == n_ours) {
        HARNESS_FAIL("%s: the caller is missing from a walk", current_what);
        show("walker", ours, n_ours);
        show("libunwind", ref, n_ref);
        return;
    }
    tally(current_what, ours + io, n_ours - io, ref + ir, n_ref - ir);
    __asm__ volatile("" ::: "memory");
}

/* From a signal's context: the leaf is the interrupted instruction. */
static void compare_ucontext(ucontext_t *uc)
{
    unw_cursor_t cursor;
    uintptr_t ref[FRAMES], ours[FRAMES];
    int n_ref = 0, full;
    if (unwinder.init_local2(&cursor, (unw_context_t *)uc,
                             UNW_INIT_SIGNAL_FRAME) == 0) {
        while (n_ref < FRAMES) {
            unw_word_t ip;
            if (unwinder.get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0)
                break;
            ref[n_ref++] = ip;
            if (unwinder.step(&cursor) <= 0)
                break;
        }
    }
    struct cfi_regs r = {(uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
                         (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
                         (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], uc};
    uintptr_t lo, hi;
    int n_ours = 0;
    if (cfi_stack_bounds(&lo, &hi) == 0)
        n_ours = cfi_walk(&r, 1, r.sp, hi, ours, FRAMES, &full);
    tally(current_what, ours, n_ours, ref, n_ref);
}

/* The instruction of walk_lib.c's walk_ra_in_rcx where the return
 * address is in rcx. */
static uintptr_t ra_nop;
static long ra_in_register;

/* The signal's context moved into walk_ra_in_rcx as if the interrupted
 * instruction had called it: pc at walk_ra_nop, the interrupted pc in
 * rcx, the stack pointer as it was (the call's push popped). */
static void compare_ra_in_register(const ucontext_t *uc)
{
    if (!ra_nop)
        return;
    ucontext_t moved = *uc;
    moved.uc_mcontext.gregs[REG_RCX] = uc->uc_mcontext.gregs[REG_RIP];
    moved.uc_mcontext.gregs[REG_RIP] = (greg_t)ra_nop;
    long before = agree.same_stacks;
    compare_ucontext(&moved);
    ra_in_register += agree.same_stacks > before;
}

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    compare_here();
    compare_ucontext(uc);
    compare_ra_in_register(uc);
}

static void load_lib(int i)
{
    {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, libs[i].file);
        libs[i].handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        assert_true(libs[i].handle != NULL);
        libs[i].recurse = (int (*)(int, walk_cb))dlsym(libs[i].handle,
                                                       "walk_recurse");
        libs[i].sort = (int (*)(walk_cb))dlsym(libs[i].handle, "walk_qsort");
        libs[i].raise_sig = (int (*)(int))dlsym(libs[i].handle, "walk_raise");
        libs[i].spin = (int (*)(volatile int *))dlsym(libs[i].handle,
                                                      "walk_spin");
        assert_true(libs[i].recurse && libs[i].sort && libs[i].raise_sig &&
                    libs[i].spin);
    }
}

static void load_libs(void)
{
    load_lib(0);
    load_lib(1);
    load_lib(3);
    ra_nop = (uintptr_t)dlsym(libs[0].handle, "walk_ra_nop");
    assert_true(ra_nop != 0);
    assert_true(cfi_tables_refresh() > 0);
}

struct spinner {
    struct lib *lib;
    volatile int stop;
    volatile int started;
};

static void *spin_thread(void *arg)
{
    struct spinner *s = arg;
    cfi_stack_learn();
    s->started = 1;
    s->lib->spin(&s->stop);
    return NULL;
}

/* Every kind of call site, with the library at l. */
static void battery(struct lib *l)
{
    char what[128];
    current_what = what;
    snprintf(what, sizeof what, "%s recursion 1", l->file);
    l->recurse(1, compare_here);
    snprintf(what, sizeof what, "%s recursion 150", l->file);
    l->recurse(150, compare_here);
    snprintf(what, sizeof what, "%s qsort callback", l->file);
    l->sort(compare_here);
    snprintf(what, sizeof what, "%s signal handler", l->file);
    l->raise_sig(SIGUSR1);
}

static void *battery_thread(void *arg)
{
    cfi_stack_learn();
    battery(arg);
    return NULL;
}

TEST(same_stacks_as_libunwind)
{
    for (int i = 0; i < 2; i++) {
        battery(&libs[i]);
        pthread_t t;
        assert_true(pthread_create(&t, NULL, battery_thread, &libs[i]) == 0);
        pthread_join(t, NULL);
        /* A signal interrupting a loop: no call in flight at the leaf. */
        struct spinner s = {&libs[i], 0, 0};
        assert_true(pthread_create(&t, NULL, spin_thread, &s) == 0);
        while (!s.started)
            sched_yield();
        for (int k = 0; k < 20; k++) {
            current_what = libs[i].file;
            pthread_kill(t, SIGUSR1);
            usleep(1000);
        }
        s.stop = 1;
        pthread_join(t, NULL);
    }
    fprintf(stderr,
            "agreement with libunwind: %ld of %ld stacks, %ld of %ld frames; "
            "%llu frames by frame pointer; %ld with the return address in "
            "a register\n",
            agree.same_stacks, agree.stacks, agree.same_frames, agree.frames,
            (unsigned long long)cfi_walk_counters.fp_frames, ra_in_register);
    expect_true(agree.stacks >= 12);
    expect_true(ra_in_register >= 4);
}

/* Code dlopen'ed after the tables were built (dlopen is not interposed):
 * its rules come straight from its .eh_frame until the next refresh. */
TEST(code_loaded_since_the_tables)
{
    load_lib(2);
    expect_true(!covered((uintptr_t)libs[2].recurse));
    long before = agree.same_stacks;
    battery(&libs[2]);
    expect_true(agree.same_stacks >= before + 4);
    dlclose(libs[2].handle);
}

/* The walker's stack from a callback, for debug_frame_only. */
static uintptr_t captured[FRAMES];
static int captured_n;

__attribute__((noinline)) static void capture(void)
{
    int full;
    captured_n = cfi_walk_here(captured, FRAMES, &full);
    __asm__ volatile("" ::: "memory");
}

/* One call site for both libraries, so that the frames outside them are
 * the same addresses. */
__attribute__((noinline)) static void recurse_in(struct lib *l, int depth)
{
    l->recurse(depth, capture);
    __asm__ volatile("" ::: "memory");
}

/* The stack as offsets from each frame's object (so that two builds of
 * one source, loaded at different addresses, compare). */
static void relative(uintptr_t *pcs, int n)
{
    for (int i = 0; i < n; i++) {
        Dl_info di;
        if (dladdr((void *)(pcs[i] - 1), &di) && di.dli_fbase)
            pcs[i] -= (uintptr_t)di.dli_fbase;
    }
}

/* libwalk_dbg.so is walk_lib.c built without unwind tables: its call-frame
 * information is in .debug_frame only (in its file, not loaded), and
 * libunwind as Debian builds it does not read that. Its code is the same
 * as libwalk_nofp.so's, at the same offsets: the walks from the same call
 * site must be the same, frame for frame, as offsets in each object. */
TEST(debug_frame_only)
{
    Dl_info a, b;
    assert_true(dladdr((void *)libs[0].recurse, &a) &&
                dladdr((void *)libs[3].recurse, &b));
    expect_true((uintptr_t)libs[0].recurse - (uintptr_t)a.dli_fbase ==
                (uintptr_t)libs[3].recurse - (uintptr_t)b.dli_fbase);
    expect_true(covered((uintptr_t)libs[3].recurse));
    for (int depth = 0; depth <= 40; depth += 20) {
        uintptr_t ref[FRAMES];
        int n_ref = 0;
        /* One call site for both (volatile: not unrolled). */
        for (volatile int k = 0; k < 2; k++) {
            recurse_in(&libs[k ? 3 : 0], depth);
            if (k == 0) {
                n_ref = captured_n;
                memcpy(ref, captured, sizeof ref);
            }
        }
        relative(ref, n_ref);
        relative(captured, captured_n);
        current_what = "libwalk_dbg.so (.debug_frame only)";
        reference = "the walk in libwalk_nofp.so";
        tally(current_what, captured, captured_n, ref, n_ref);
        reference = "libunwind";
        expect_true(n_ref > depth + 3);
    }
}

static int walks_left;
static int deepest;

static void walk_only(void)
{
    uintptr_t pcs[FRAMES];
    int full;
    while (walks_left > 0) {
        walks_left--;
        int n = cfi_walk_here(pcs, FRAMES, &full);
        if (n > deepest)
            deepest = n;
    }
}

TEST(walks_never_allocate)
{
    walks_left = 1;
    libs[0].recurse(20, walk_only); /* warm: lazy binding done */
    size_t before = in_use();
    walks_left = 1000;
    libs[0].recurse(20, walk_only);
    expect_int_eq(in_use() - before, 0);
    expect_true(deepest > 20);
}

static volatile sig_atomic_t trapped;

static void on_sigsys(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ucv;
    trapped++;
    uc->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
}

/* libunwind's step-by-step walk (what the CPU handler used): Debian's
 * build blocks every signal around its cache lock. */
static void libunwind_walks(void)
{
    while (walks_left > 0) {
        walks_left--;
        unw_context_t ctx;
        unw_cursor_t cursor;
        unwinder.getcontext(&ctx);
        if (unwinder.init_local(&cursor, &ctx) == 0)
            while (unwinder.step(&cursor) > 0)
                ;
    }
}

/* The system calls that `walks` walks make, counted in a child whose
 * every system call but the way out traps. */
static int count_system_calls(walk_cb walk, int walks)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigsys;
        sa.sa_flags = SA_SIGINFO;
        sigaction(SIGSYS, &sa, NULL);
        struct sock_filter code[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 2, 0),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {sizeof code / sizeof code[0], code};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
            _exit(255);
        walks_left = walks;
        libs[0].recurse(10, walk);
        _exit(trapped > 250 ? 250 : trapped);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 254;
}

TEST(walks_make_no_system_call)
{
    walks_left = 1;
    libs[0].recurse(10, libunwind_walks); /* warm libunwind's caches */
    /* What the child does without any walk (a sanitizer's runtime may
     * make a call or two of its own) is subtracted. */
    int base = count_system_calls(walk_only, 0);
    int ours = count_system_calls(walk_only, 1000) - base;
    int control = count_system_calls(libunwind_walks, 10) - base;
    fprintf(stderr, "system calls: walker %d in 1000 walks, libunwind %d in "
                    "10 (%d without walks)\n", ours, control, base);
    expect_int_eq(ours, 0);
    /* The check can see them (libunwind's through the C library; under a
     * sanitizer its interceptors answer them). */
    expect_true(base < 254);
    if (!__sanitizer_get_current_allocated_bytes)
        expect_true(control > 0);
}

/* A garbage stack (random words, some pointing back into it) ends the
 * walk without a fault, whatever the registers. */
TEST(garbage_stacks_end_cleanly)
{
    static uintptr_t junk[4096];
    uint64_t x = 88172645463325252ULL;
    uintptr_t text = (uintptr_t)libs[1].recurse;
    for (int round = 0; round < 2000; round++) {
        for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            switch (x % 4) {
            case 0: junk[i] = (uintptr_t)&junk[x % 4096]; break;
            case 1: junk[i] = text + (x >> 8) % 4096; break;
            default: junk[i] = (uintptr_t)x; break;
            }
        }
        struct cfi_regs r = {text + x % 512, (uintptr_t)&junk[x % 2048],
                             junk[x % 4096], NULL};
        uintptr_t pcs[64];
        int full;
        int n = cfi_walk(&r, x & 1, (uintptr_t)junk,
                         (uintptr_t)(junk + sizeof junk / sizeof junk[0]),
                         pcs, 64, &full);
        expect_true(n >= 1 && n <= 64);
    }
    /* Code with no table (generated at run time): the leaf stays. */
    uintptr_t pcs[8];
    int full;
    struct cfi_regs r = {(uintptr_t)junk, (uintptr_t)junk, 0, NULL};
    expect_int_eq(cfi_walk(&r, 1, (uintptr_t)junk, (uintptr_t)(junk + 16),
                           pcs, 8, &full),
                  1);
}

static int covered(uintptr_t pc)
{
    const struct cfi_set *set = cfi_current;
    for (size_t i = 0; set && i < set->n; i++)
        if (pc >= set->objects[i].lo && pc < set->objects[i].hi)
            return set->objects[i].nrows > 0;
    return 0;
}

TEST(dlclose_drops_tables)
{
    uintptr_t code[2];
    for (int i = 0; i < 2; i++) {
        code[i] = (uintptr_t)libs[i].recurse;
        expect_true(covered(code[i]));
    }
    for (int i = 0; i < 2; i++)
        dlclose(libs[i].handle);
    expect_true(cfi_tables_refresh() > 0);
    for (int i = 0; i < 2; i++)
        expect_true(!covered(code[i]));
    fprintf(stderr, "tables: %zu bytes of rows\n", cfi_tables_bytes());
}

/* ---- bench mode: test_cfi_walk bench (test/bench/unwind.sh) ----------- */

#define BENCH_WALKS 1000
#define BENCH_BATCHES 11

static double thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int bench_frames;
static double bench_median_ns;

__attribute__((noinline)) static void bench_walker_walks(void)
{
    uintptr_t pcs[FRAMES];
    int full;
    for (int i = 0; i < BENCH_WALKS; i++)
        bench_frames = cfi_walk_here(pcs, FRAMES, &full);
}

__attribute__((noinline)) static void bench_libunwind_walks(void)
{
    void *raw[FRAMES];
    for (int i = 0; i < BENCH_WALKS; i++)
        bench_frames = unwinder.backtrace(raw, FRAMES);
}

/* gperftools' CPU profiler's own unwinder (what its SIGPROF handler
 * calls), from libprofiler.so.0 when it is installed. */
static int (*profiler_stack)(void **result, int max_depth, int skip,
                             const void *uc);

__attribute__((noinline)) static void bench_libprofiler_walks(void)
{
    void *raw[FRAMES];
    for (int i = 0; i < BENCH_WALKS; i++)
        bench_frames = profiler_stack(raw, FRAMES, 0, NULL);
}

static void (*bench_fn)(void);

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench_batches(void)
{
    double ns[BENCH_BATCHES];
    for (int b = 0; b < BENCH_BATCHES; b++) {
        double t0 = thread_ns();
        bench_fn();
        ns[b] = (thread_ns() - t0) / BENCH_WALKS;
    }
    qsort(ns, BENCH_BATCHES, sizeof ns[0], by_value);
    bench_median_ns = ns[BENCH_BATCHES / 2];
}

/* Walks from `depth` levels of recursion in the library without frame
 * pointers; who: "walker", "libunwind", "libprofiler" or all three. */
static int bench(int depth, const char *who_only)
{
    static const struct {
        const char *name;
        void (*fn)(void);
    } whos[] = {{"walker", bench_walker_walks},
                {"libunwind", bench_libunwind_walks},
                {"libprofiler", bench_libprofiler_walks}};
    void *raw[FRAMES];
    unwinder.backtrace(raw, FRAMES); /* libunwind's caches warm */
    void *prof = dlopen("libprofiler.so.0", RTLD_NOW | RTLD_LOCAL);
    if (prof)
        profiler_stack = (int (*)(void **, int, int, const void *))dlsym(
            prof, "ProfilerGetStackTrace");
    for (size_t who = 0; who < sizeof whos / sizeof whos[0]; who++) {
        if (who_only && strcmp(who_only, whos[who].name))
            continue;
        if (whos[who].fn == bench_libprofiler_walks && !profiler_stack) {
            printf("%s missing\n", whos[who].name);
            continue;
        }
        if (whos[who].fn == bench_libprofiler_walks)
            profiler_stack(raw, FRAMES, 0, NULL); /* its caches warm */
        bench_fn = whos[who].fn;
        libs[0].recurse(depth, bench_batches);
        printf("%s frames=%d median_ns=%.0f walks=%d\n", whos[who].name,
               bench_frames, bench_median_ns, BENCH_WALKS * BENCH_BATCHES);
    }
    return 0;
}

int main(int argc, char **argv)
{
    char self[4096];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(dir, sizeof dir, "%s", dirname(self));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    if (unwinder_load() != 0) {
        fprintf(stderr, "libunwind is needed as the reference\n");
        return 1;
    }
    cfi_stack_learn();
    load_libs();
    if (argc > 2 && strcmp(argv[1], "bench") == 0)
        return bench(atoi(argv[2]), argc > 3 ? argv[3] : NULL);
    agent_find_object = (int (*)(void *, struct dl_find_object *))dlsym(
        RTLD_DEFAULT, "_dl_find_object"); /* phdr_hooks.c's job */
    return run_tests(same_stacks_as_libunwind, code_loaded_since_the_tables,
                     debug_frame_only,
                     walks_never_allocate,
                     walks_make_no_system_call, garbage_stacks_end_cleanly,
                     hostile_addresses_stay_in_bounds,
                     dlclose_drops_tables, NULL);
}
