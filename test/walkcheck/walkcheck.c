/*
 * Test-only preload library (build/test/libwalkcheck.so, never part of the
 * agent): the table-driven walker (agent/cfi_*.c, linked in) against
 * libunwind, from the same signal contexts, in any program.
 *
 * Every thread (the main thread in the constructor, others through an
 * interposed pthread_create) gets a CPU-time timer of its own that sends it
 * SIGPROF every WALKCHECK_US microseconds of its CPU time (default 1000).
 * The handler walks the interrupted stack twice from its ucontext: once
 * with cfi_walk, once with libunwind (unw_init_local2 with
 * UNW_INIT_SIGNAL_FRAME, then unw_step), and compares the two lists of
 * program counters frame for frame. libunwind is not async-signal-safe
 * (it takes a lock with every signal blocked and may call
 * dl_iterate_phdr): acceptable for a test harness, never for the agent.
 *
 * At exit, when WALKCHECK_REPORT is set, the counts and the first
 * differences (both stacks symbolized with dladdr) go to the file it
 * names (the process that loaded the library only, not forked children):
 *
 *   samples N equal N differ N no_bounds N unknown_leaf N leaf_kept N
 *
 * and, while it runs, every 200 ms, the samples compared so far (equal and
 * differing) to the file WALKCHECK_PROGRESS names, as "compared N", so that
 * a test keeps a program under load until it has enough of them (a loaded
 * machine gives a server few samples a second).
 *
 * unknown_leaf counts samples whose interrupted pc lies in no object
 * (generated code); leaf_kept those of them where the walker's first frame
 * is that pc. The tables are refreshed by a thread of the library's own
 * every 200 ms when a walk met code with no table (objects dlopen'ed
 * since), as the agent's CPU profile does once a second.
 */
#include "agent/stacks/cfi.h"
#include "agent/cpu/cpu.h"
#include "agent/log.h"
#include "agent/stacks/objects.h"
#include "agent/stacks/phdr_cache.h"
#include "agent/core/real.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

/* ---- what the cfi objects need from the rest of the agent ------------- */

int (*agent_find_object)(void *addr, struct dl_find_object *out);
int cpu_phdr_readers;
int cpu_phdr_busy;

/* No fork gate here: the harness's host does not fork. */
int loader_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *),
                        void *data);
int loader_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *),
                        void *data)
{
    return dl_iterate_phdr(cb, data);
}

void log_msg(int level, const char *fmt, ...)
{
    (void)level;
    (void)fmt;
}

/* The agent's way to the C library's syscall (agent/core/real.h); no
 * doors here, so the C library's own. Six arguments, as syscall passes
 * them on. */
long real_syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    return syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ---- libunwind, loaded privately (its _Unwind_* must not take C++
 * exceptions over from libgcc in the host's global scope) --------------- */

static int (*u_init_local2)(unw_cursor_t *, unw_context_t *, int);
static int (*u_step)(unw_cursor_t *);
static int (*u_get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);

static int load_libunwind(void)
{
    void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    u_init_local2 = (int (*)(unw_cursor_t *, unw_context_t *, int))dlsym(
        h, "_ULx86_64_init_local2");
    u_step = (int (*)(unw_cursor_t *))dlsym(h, "_ULx86_64_step");
    u_get_reg = (int (*)(unw_cursor_t *, unw_regnum_t, unw_word_t *))dlsym(
        h, "_ULx86_64_get_reg");
    return u_init_local2 && u_step && u_get_reg ? 0 : -1;
}

/* ---- counts and differences --------------------------------------------- */

#define FRAMES 128
#define KEPT 20

static struct {
    long samples, equal, differ, no_bounds, unknown_leaf, leaf_kept;
    long ours_shorter, ours_longer, first_differs_at[4];
    long frames, same_frames;
} tally;

struct difference {
    int n_ours, n_ref;
    uintptr_t ours[FRAMES], ref[FRAMES];
};
static struct difference kept[KEPT];
static int kept_n;
static volatile int stopping;
static long interval_us = 1000;
static pid_t report_pid;
/* Read at start: some programs (nginx) clear their environment. */
static char report_path[4096];
static char progress_path[4096];

static int in_some_object(uintptr_t pc)
{
    struct dl_find_object fo;
    return agent_find_object && agent_find_object((void *)pc, &fo) == 0;
}

/* The two walks from uc, compared. Runs in the SIGPROF handler; libunwind
 * is not async-signal-safe (see the file comment). */
static void compare(ucontext_t *uc)
{
    uintptr_t ref[FRAMES], ours[FRAMES];
    int n_ref = 0, n_ours = 0, full;
    unw_cursor_t cursor;
    if (u_init_local2(&cursor, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) ==
        0) {
        while (n_ref < FRAMES) {
            unw_word_t ip;
            if (u_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0)
                break;
            ref[n_ref++] = ip;
            if (u_step(&cursor) <= 0)
                break;
        }
    }
    struct cfi_regs r = {(uintptr_t)uc->uc_mcontext.gregs[REG_RIP],
                         (uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
                         (uintptr_t)uc->uc_mcontext.gregs[REG_RBP], uc};
    uintptr_t lo, hi;
    __atomic_fetch_add(&tally.samples, 1, __ATOMIC_RELAXED);
    if (cfi_stack_bounds(&lo, &hi) != 0 || r.sp < lo || r.sp >= hi) {
        __atomic_fetch_add(&tally.no_bounds, 1, __ATOMIC_RELAXED);
        return;
    }
    n_ours = cfi_walk(&r, 1, r.sp, hi, ours, FRAMES, &full);
    if (!in_some_object(r.pc)) {
        __atomic_fetch_add(&tally.unknown_leaf, 1, __ATOMIC_RELAXED);
        if (n_ours >= 1 && ours[0] == r.pc)
            __atomic_fetch_add(&tally.leaf_kept, 1, __ATOMIC_RELAXED);
    }
    int same = n_ours == n_ref, at = -1;
    for (int i = 0; i < n_ref; i++) {
        if (i < n_ours && ours[i] == ref[i]) {
            __atomic_fetch_add(&tally.same_frames, 1, __ATOMIC_RELAXED);
        } else {
            if (at < 0)
                at = i;
            same = 0;
        }
    }
    __atomic_fetch_add(&tally.frames, n_ref, __ATOMIC_RELAXED);
    if (same) {
        __atomic_fetch_add(&tally.equal, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(&tally.differ, 1, __ATOMIC_RELAXED);
    if (at < 0)
        at = n_ref;
    __atomic_fetch_add(&tally.first_differs_at[at > 3 ? 3 : at], 1,
                       __ATOMIC_RELAXED);
    __atomic_fetch_add(n_ours < n_ref ? &tally.ours_shorter : &tally.ours_longer,
                       1, __ATOMIC_RELAXED);
    int slot = __atomic_fetch_add(&kept_n, 1, __ATOMIC_RELAXED);
    if (slot < KEPT) {
        struct difference *d = &kept[slot];
        d->n_ours = n_ours;
        d->n_ref = n_ref;
        memcpy(d->ours, ours, sizeof ours[0] * (size_t)n_ours);
        memcpy(d->ref, ref, sizeof ref[0] * (size_t)n_ref);
    }
}

static void on_sigprof(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    int saved = errno;
    if (!stopping)
        compare(ucv);
    errno = saved;
}

/* ---- per-thread CPU timers ---------------------------------------------- */

static __thread timer_t thread_timer;
static __thread int thread_armed;

static void arm_this_thread(void)
{
    cfi_stack_learn();
    struct sigevent ev;
    memset(&ev, 0, sizeof ev);
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGPROF;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &thread_timer) != 0)
        return;
    struct itimerspec its;
    its.it_interval.tv_sec = interval_us / 1000000;
    its.it_interval.tv_nsec = (interval_us % 1000000) * 1000;
    its.it_value = its.it_interval;
    timer_settime(thread_timer, 0, &its, NULL);
    thread_armed = 1;
}

static void disarm_this_thread(void)
{
    if (thread_armed)
        timer_delete(thread_timer);
    thread_armed = 0;
}

static void disarm_at_exit(void *unused)
{
    (void)unused;
    disarm_this_thread();
}

struct start {
    void *(*fn)(void *);
    void *arg;
};

static void *thread_start(void *p)
{
    struct start s = *(struct start *)p;
    free(p);
    void *ret = NULL;
    arm_this_thread();
    pthread_cleanup_push(disarm_at_exit, NULL);
    ret = s.fn(s.arg);
    pthread_cleanup_pop(1);
    return ret;
}

__attribute__((visibility("default"))) int
pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *),
               void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *,
                       void *(*)(void *), void *);
    if (!real)
        real = (int (*)(pthread_t *, const pthread_attr_t *,
                        void *(*)(void *), void *))dlsym(RTLD_NEXT,
                                                         "pthread_create");
    struct start *s = malloc(sizeof *s);
    if (!s)
        return real(t, a, fn, arg);
    s->fn = fn;
    s->arg = arg;
    int ret = real(t, a, thread_start, s);
    if (ret != 0)
        free(s);
    return ret;
}

/* ---- tables kept up to date --------------------------------------------- */

/* "compared N" to progress_path, replaced whole (a reader never sees half
 * a line), in the process that loaded the library only. */
static void progress(void)
{
    if (!*progress_path || getpid() != report_pid)
        return;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", progress_path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "compared %ld\n", __atomic_load_n(&tally.equal, __ATOMIC_RELAXED) +
                                     __atomic_load_n(&tally.differ, __ATOMIC_RELAXED));
    if (fclose(f) == 0)
        rename(tmp, progress_path);
}

static void *refresher(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        struct timespec ts = {0, 200 * 1000 * 1000};
        nanosleep(&ts, NULL);
        cfi_tables_maybe_refresh();
        progress();
    }
    return NULL;
}

/* ---- report ------------------------------------------------------------- */

static void show(FILE *f, const char *who, const uintptr_t *pcs, int n)
{
    fprintf(f, "  %s (%d frames):\n", who, n);
    for (int i = 0; i < n; i++) {
        Dl_info di;
        memset(&di, 0, sizeof di);
        int ok = dladdr((void *)pcs[i], &di);
        const char *obj = ok && di.dli_fname ? strrchr(di.dli_fname, '/') : NULL;
        fprintf(f, "    #%-2d %#lx %s+%#lx (%s+%#lx)\n", i, (unsigned long)pcs[i],
                ok && di.dli_sname ? di.dli_sname : "?",
                ok && di.dli_saddr ? (unsigned long)(pcs[i] - (uintptr_t)di.dli_saddr) : 0UL,
                obj ? obj + 1 : "?",
                ok ? (unsigned long)(pcs[i] - (uintptr_t)di.dli_fbase) : 0UL);
    }
}

__attribute__((destructor)) static void report(void)
{
    stopping = 1;
    disarm_this_thread();
    const char *path = report_path;
    if (!*path || getpid() != report_pid)
        return;
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f,
            "samples %ld equal %ld differ %ld no_bounds %ld unknown_leaf %ld "
            "leaf_kept %ld\n",
            tally.samples, tally.equal, tally.differ, tally.no_bounds,
            tally.unknown_leaf, tally.leaf_kept);
    fprintf(f,
            "frames %ld same_frames %ld; differing: walker shorter %ld, "
            "longer or same length %ld; first difference at frame 0: %ld, "
            "1: %ld, 2: %ld, 3 or deeper: %ld; walker fp_frames %llu "
            "no_table %llu row_cache_misses %llu rule_cache_slow %llu\n",
            tally.frames, tally.same_frames, tally.ours_shorter,
            tally.ours_longer, tally.first_differs_at[0],
            tally.first_differs_at[1], tally.first_differs_at[2],
            tally.first_differs_at[3],
            (unsigned long long)cfi_walk_counters.fp_frames,
            (unsigned long long)cfi_walk_counters.no_table,
            (unsigned long long)cfi_walk_counters.cache_misses,
            (unsigned long long)cfi_walk_counters.slow_frames);
    int n = kept_n < KEPT ? kept_n : KEPT;
    for (int i = 0; i < n; i++) {
        fprintf(f, "difference %d:\n", i + 1);
        show(f, "walker", kept[i].ours, kept[i].n_ours);
        show(f, "libunwind", kept[i].ref, kept[i].n_ref);
    }
    fclose(f);
}

__attribute__((constructor)) static void start(void)
{
    const char *us = getenv("WALKCHECK_US");
    if (us && atol(us) > 0)
        interval_us = atol(us);
    report_pid = getpid();
    const char *path = getenv("WALKCHECK_REPORT");
    snprintf(report_path, sizeof report_path, "%s", path ? path : "");
    path = getenv("WALKCHECK_PROGRESS");
    snprintf(progress_path, sizeof progress_path, "%s", path ? path : "");
    if (load_libunwind() != 0) {
        fprintf(stderr, "walkcheck: cannot load libunwind.so.8\n");
        return;
    }
    agent_find_object = (int (*)(void *, struct dl_find_object *))dlsym(
        RTLD_DEFAULT, "_dl_find_object");
    cfi_tables_refresh();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    sigaction(SIGPROF, &sa, NULL);
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                       void *);
    real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                    void *))dlsym(RTLD_NEXT, "pthread_create");
    pthread_t t;
    if (real && real(&t, NULL, refresher, NULL) == 0)
        pthread_detach(t);
    arm_this_thread();
}
