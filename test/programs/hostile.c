/*
 * A host that does what real programs do and profilers fear, one mode per
 * run, so each condition is its own test (test/integration/hostile_*.sh).
 * Every mode prints what it did on stdout and ends with a known status, so
 * a run under the agent can be compared with a run without it.
 *
 *   hostile threads N LINGER    N short-lived threads (batches of 50), each
 *                               burning a little CPU in short_task (after
 *                               the file $HOSTILE_GO exists, when set: up
 *                               to 10 s, so a test can start them inside
 *                               its profile whatever the machine's speed); the
 *                               main thread burns in main_burn meanwhile;
 *                               then burns LINGER more seconds in main_burn
 *   hostile masked SECONDS      two threads that block every signal burn in
 *                               masked_burn, one ordinary in open_burn, until
 *                               SECONDS after a CPU profile began; at
 *                               the end the masked threads unblock every
 *                               signal (a profiling signal left pending
 *                               would be delivered then) and burn a little
 *   hostile recurse DEPTH SECS  recursion DEPTH frames deep; at the bottom:
 *                               allocate 64 MiB kept live, create a thread,
 *                               say "at the bottom", then burn in deep_leaf
 *                               for SECS or until SIGUSR1
 *   hostile dlheap PLUGIN SECS  dlopen, call plug_alloc (allocations kept
 *                               after the plugin is gone), dlclose, in a loop
 *                               for SECS or until SIGUSR1
 *   hostile forks SECONDS [STOP] a thread forks children that malloc, lock,
 *                               create a thread, print and exit 0, while two
 *                               threads allocate and lock without pause,
 *                               for SECONDS or until the file STOP exists;
 *                               prints "forks=N ok=N" (every child reaped)
 *   hostile loader DELAY        after DELAY seconds, one thread burns 1.5 s
 *                               and allocates inside a dl_iterate_phdr
 *                               callback (holding the loader lock) while
 *                               another creates a thread from code never
 *                               run before; prints "loader ok" and the
 *                               callback's CPU time, then burns until
 *                               SIGUSR1 (60 s at most)
 *   hostile allocator ROUNDS [PLUGIN]
 *                               ROUNDS times, 8 new threads start together
 *                               and allocate and free 16 bytes in
 *                               alloc_churn, 100000 times and 200 ms at
 *                               least (run on jemalloc with one arena and
 *                               no thread cache, its locks contend);
 *                               with PLUGIN, each thread first touches the
 *                               plugin's thread-local plug_tls (from
 *                               plug_touch), and the main thread dlcloses
 *                               the plugin while they churn; prints
 *                               "allocator ok", then sleeps 60 s
 *   hostile iconv SECONDS       one thread runs code outside any loaded
 *                               object (an anonymous executable page); the
 *                               main thread converts text to 8 legacy
 *                               charsets in turn for SECONDS, so the C
 *                               library keeps loading and unloading its
 *                               gconv modules (its own dlopen/dlclose);
 *                               prints "conversions=N", and every 50 ms
 *                               "t=REALTIME_NS cpu_ms=N": the CPU time of
 *                               both threads then
 *   hostile end HOW DELAY       burns for DELAY seconds and then ends by HOW:
 *                               thread-exit (exit(3) from a thread), _exit
 *                               (_exit(4)), abort, exec (execs sh, exit 5),
 *                               return (returns 6 from main)
 */
#include <dlfcn.h>
#include <iconv.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profiling_began.h"
#include "spin.h"

static volatile int stop;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* SIGUSR1: the test asks the loader mode to end. The handler only sets
 * the flag. */
static volatile sig_atomic_t usr1;
static void on_usr1(int sig)
{
    (void)sig;
    usr1 = 1;
}

/* The calling thread's own CPU time, in seconds. */
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}


__attribute__((noinline)) void short_task(void) { spin(200000); }
__attribute__((noinline)) void main_burn(void) { spin(2000000); }
__attribute__((noinline)) void masked_burn(void) { spin(2000000); }
__attribute__((noinline)) void open_burn(void) { spin(2000000); }
__attribute__((noinline)) void deep_leaf(void) { spin(2000000); }
__attribute__((noinline)) void end_burn(void) { spin(2000000); }

/* ---- threads ---------------------------------------------------------- */

static void *short_thread(void *arg)
{
    (void)arg;
    short_task();
    return NULL;
}

static int run_threads(long n, double linger)
{
    const char *go = getenv("HOSTILE_GO");
    for (int i = 0; go && i < 1000 && access(go, F_OK) != 0; i++)
        usleep(10000);
    long done = 0;
    while (done < n) {
        pthread_t t[50];
        int k = 0;
        for (; k < 50 && done + k < n; k++)
            if (pthread_create(&t[k], NULL, short_thread, NULL) != 0)
                return 1;
        for (int i = 0; i < k; i++)
            pthread_join(t[i], NULL);
        done += k;
        main_burn();
    }
    printf("threads=%ld\n", done);
    double end = now() + linger;
    while (now() < end)
        main_burn();
    return 0;
}

/* ---- masked ----------------------------------------------------------- */

static void *masked_thread(void *arg)
{
    volatile double *end = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    long rounds = 0;
    while (now() < *end) {
        masked_burn();
        rounds++;
    }
    pthread_sigmask(SIG_UNBLOCK, &all, NULL);
    for (int i = 0; i < 50; i++)
        masked_burn();
    printf("masked rounds>0: %d\n", rounds > 0);
    return NULL;
}

static void *open_thread(void *arg)
{
    volatile double *end = arg;
    while (now() < *end)
        open_burn();
    return NULL;
}

/* The threads start (and block) at once; they end SECONDS after a CPU
 * profile began (after 60 s without one), however late the agent served. */
static int run_masked(double secs)
{
    static volatile double end = 1e300;
    pthread_t t[3];
    pthread_create(&t[0], NULL, masked_thread, (void *)&end);
    pthread_create(&t[1], NULL, masked_thread, (void *)&end);
    pthread_create(&t[2], NULL, open_thread, (void *)&end);
    wait_profiling(60000);
    end = now() + secs;
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("masked done\n");
    return 0;
}

/* ---- recurse ---------------------------------------------------------- */

static double deep_secs;
static void *deep_kept;

static void *nothing(void *arg) { return arg; }

__attribute__((noinline)) static long recurse(long depth)
{
    if (depth == 0) {
        deep_kept = malloc(64 << 20);
        memset(deep_kept, 1, 64 << 20);
        pthread_t t;
        pthread_create(&t, NULL, nothing, NULL);
        pthread_join(t, NULL);
        printf("at the bottom\n");
        double end = now() + deep_secs;
        while (now() < end && !usr1)
            deep_leaf();
        return 1;
    }
    volatile char pad[32];
    pad[0] = (char)depth;
    return recurse(depth - 1) + pad[0] - (char)depth;
}

/* ---- dlheap ----------------------------------------------------------- */

static int run_dlheap(const char *plugin, double secs)
{
    double end = now() + secs;
    long rounds = 0;
    while (now() < end && !usr1) {
        void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return 1;
        void (*fn)(long) = (void (*)(long))dlsym(h, "plug_alloc");
        if (!fn)
            return 1;
        fn(rounds);
        dlclose(h);
        rounds++;
    }
    printf("dl rounds>100: %d\n", rounds > 100);
    return 0;
}

/* ---- forks ------------------------------------------------------------ */

static pthread_mutex_t busy_lock = PTHREAD_MUTEX_INITIALIZER;

static void *busy_thread(void *arg)
{
    (void)arg;
    unsigned n = 1;
    while (!stop) {
        pthread_mutex_lock(&busy_lock);
        void *p = malloc(16 + (n = n * 1103515245u + 12345u) % 4096);
        pthread_mutex_unlock(&busy_lock);
        free(p);
    }
    return NULL;
}

static void child_work(void)
{
    /* Everything a lock held at fork time would deadlock on. */
    pthread_mutex_lock(&busy_lock);
    void *p = malloc(100000);
    pthread_mutex_unlock(&busy_lock);
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL) == 0)
        pthread_join(t, NULL);
    free(p);
    char line[64];
    int len = snprintf(line, sizeof line, "child %d\n", (int)getpid());
    if (write(1, line, (size_t)len) != len)
        _exit(9);
    _exit(0);
}

/* The program's own lock is made fork-safe the way programs do it; the
 * agent's locks and the allocator's are what the test is about. */
static void lock_busy(void) { pthread_mutex_lock(&busy_lock); }
static void unlock_busy(void) { pthread_mutex_unlock(&busy_lock); }

/* Waits for a child; 1 if it exited 0. A child still there after 20 s is
 * stuck (on a lock held at fork time): its threads' stacks go to stderr,
 * from gdb when there is one, and it is killed and counted as failed. */
static int reap(pid_t pid)
{
    int status;
    double deadline = now() + 20;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (r < 0)
            return 0;
        if (now() > deadline)
            break;
        usleep(1000);
    }
    fprintf(stderr, "child %d is stuck\n", (int)pid);
    char cmd[200];
    snprintf(cmd, sizeof cmd,
             "command -v gdb >/dev/null && gdb -p %d -batch "
             "-ex 'thread apply all bt' 2>/dev/null | grep '^#' >&2",
             (int)pid);
    if (system(cmd) == -1)
        perror("system");
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return 0;
}

/* Until secs passed, or sooner once the file stop (if any) exists. */
static int run_forks(double secs, const char *stop_file)
{
    pthread_atfork(lock_busy, unlock_busy, unlock_busy);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, busy_thread, NULL);
    double end = now() + secs;
    long forks = 0, ok = 0;
    while (now() < end && !(stop_file && forks > 0 && access(stop_file, F_OK) == 0)) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            child_work();
        if (pid < 0)
            break;
        forks++;
        if (reap(pid))
            ok++;
    }
    stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("forks=%ld ok=%ld\n", forks, ok);
    return 0;
}

/* ---- loader lock ---------------------------------------------------- */

static volatile int in_callback;
static long callback_cpu_ms;

/* Distinct allocation sites, each new to the unwinder when first used. */
#define SITE(i)                                                               \
    __attribute__((noinline)) static void site##i(void)                      \
    {                                                                         \
        void *p = malloc(1000 + i);                                           \
        __asm__ volatile("" : : "r"(p) : "memory"); /* not elided */          \
        free(p);                                                              \
    }
#define SITES8(a) SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4)      \
    SITE(a##5) SITE(a##6) SITE(a##7)
SITES8(1) SITES8(2) SITES8(3) SITES8(4)
static void (*const sites[])(void) = {
    site10, site11, site12, site13, site14, site15, site16, site17,
    site20, site21, site22, site23, site24, site25, site26, site27,
    site30, site31, site32, site33, site34, site35, site36, site37,
    site40, site41, site42, site43, site44, site45, site46, site47,
};

__attribute__((noinline)) void loader_burn(void) { spin(2000000); }

static int slow_callback(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    (void)data;
    in_callback = 1;
    double cpu0 = thread_cpu();
    double start = now(), end = start + 1.5;
    size_t nsites = sizeof sites / sizeof sites[0];
    while (now() < end) {
        loader_burn();
        /* Sampled at rate 1: a capture in here, from a new site every
         * 40 ms, so some come after the other thread blocks. */
        sites[(size_t)((now() - start) / 0.04) % nsites]();
    }
    /* What the profile should hold of the callback: its own CPU time (on
     * a busy machine well under its 1.5 s of wall time). */
    callback_cpu_ms = (long)((thread_cpu() - cpu0) * 1000);
    return 1;
}

static void *loader_holder(void *arg)
{
    (void)arg;
    dl_iterate_phdr(slow_callback, NULL);
    return NULL;
}

/* Never run before: a profiler's first stack capture here cannot be
 * answered from any unwinder cache and has to look up unwind tables. */
__attribute__((noinline)) static void fresh_path(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL) == 0)
        pthread_join(t, NULL);
    __asm__ volatile("" ::: "memory");
}

static int run_loader(double delay)
{
    signal(SIGUSR1, on_usr1);
    double end = now() + delay;
    while (now() < end)
        main_burn();
    pthread_t h;
    pthread_create(&h, NULL, loader_holder, NULL);
    while (!in_callback)
        usleep(1000);
    usleep(100 * 1000);
    fresh_path();
    pthread_join(h, NULL);
    printf("loader ok\ncallback_cpu_ms=%ld\n", callback_cpu_ms);
    fflush(stdout);
    /* Burns on until the test has its profile (SIGUSR1), 60 s at most. */
    end = now() + 60;
    while (!usr1 && now() < end)
        main_burn();
    return 0;
}

/* ---- allocator locks ------------------------------------------------ */

/* The loader's own per-thread allocation is 16 bytes too: the same size
 * class, the same allocator lock. */
/* A round's churners start together and churn for at least 200 ms: on a
 * busy machine threads that ran one after another in their own time
 * slices would never meet on the lock. */
static volatile double churn_end;
static int churn_ready, churn_go;

__attribute__((noinline)) static void alloc_churn(void)
{
    for (long i = 0; i < 100000 || now() < churn_end; i++) {
        void *p = malloc(16);
        __asm__ volatile("" : : "r"(p) : "memory"); /* not elided */
        free(p);
    }
}

static void (*plug_touch)(void);
static int touched;

static void *churner(void *arg)
{
    (void)arg;
    if (plug_touch) {
        plug_touch(); /* this thread's block of the plugin's storage */
        __atomic_fetch_add(&touched, 1, __ATOMIC_SEQ_CST);
    }
    __atomic_fetch_add(&churn_ready, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&churn_go, __ATOMIC_SEQ_CST))
        sched_yield();
    alloc_churn();
    return NULL;
}

static int run_allocator(long rounds, const char *plugin)
{
    for (long r = 0; r < rounds; r++) {
        void *h = NULL;
        touched = 0;
        if (plugin) {
            h = dlopen(plugin, RTLD_NOW);
            if (!h) {
                fprintf(stderr, "dlopen %s: %s\n", plugin, dlerror());
                return 1;
            }
            plug_touch = (void (*)(void))dlsym(h, "plug_touch");
        }
        pthread_t t[8];
        churn_ready = churn_go = 0;
        for (int i = 0; i < 8; i++)
            pthread_create(&t[i], NULL, churner, NULL);
        while (__atomic_load_n(&churn_ready, __ATOMIC_SEQ_CST) < 8)
            usleep(100);
        churn_end = now() + 0.2;
        __atomic_store_n(&churn_go, 1, __ATOMIC_SEQ_CST);
        if (h) {
            /* Unloaded under the churning threads, whose next use of any
             * dynamic thread-local storage frees their block of it. */
            while (__atomic_load_n(&touched, __ATOMIC_SEQ_CST) < 8)
                usleep(100);
            plug_touch = NULL;
            dlclose(h);
        }
        for (int i = 0; i < 8; i++)
            pthread_join(t[i], NULL);
    }
    printf("allocator ok\n");
    sleep(60);
    return 0;
}

/* ---- the C library's own unloads ------------------------------------- */

static void *outside_objects(void *arg)
{
    (void)arg;
    /* jmp . : spins at an address no object covers, so every unwind of
     * this thread looks the address up in every loaded object. */
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return NULL;
    page[0] = 0xeb;
    page[1] = 0xfe;
    ((void (*)(void))page)();
    return NULL;
}

/* CPU time of the calling thread and of thread T, in milliseconds. */
static long cpu_ms_with(pthread_t t)
{
    clockid_t c;
    struct timespec ts = {0, 0};
    if (pthread_getcpuclockid(t, &c) == 0)
        clock_gettime(c, &ts);
    return (long)(thread_cpu() * 1000) + ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int run_iconv(double secs)
{
    static const char *const charsets[] = {
        "ISO-8859-2", "ISO-8859-3", "ISO-8859-4", "ISO-8859-5",
        "KOI8-R",     "CP1251",     "ISO-8859-7", "EBCDIC-US"};
    pthread_t t;
    pthread_create(&t, NULL, outside_objects, NULL);
    long conversions = 0;
    double end = now() + secs;
    double next_report = 0;
    while (now() < end) {
        if (now() >= next_report) {
            struct timespec rt;
            clock_gettime(CLOCK_REALTIME, &rt);
            printf("t=%lld%09ld cpu_ms=%ld\n", (long long)rt.tv_sec,
                   rt.tv_nsec, cpu_ms_with(t));
            fflush(stdout);
            next_report = now() + 0.05;
        }
        for (size_t i = 0; i < sizeof charsets / sizeof charsets[0]; i++) {
            iconv_t cd = iconv_open(charsets[i], "UTF-8");
            if (cd == (iconv_t)-1) {
                perror(charsets[i]);
                return 1;
            }
            char in[] = "hello", out[64];
            char *ip = in, *op = out;
            size_t il = 5, ol = sizeof out;
            if (iconv(cd, &ip, &il, &op, &ol) != (size_t)-1)
                conversions++;
            iconv_close(cd);
        }
    }
    printf("conversions=%ld\n", conversions);
    return 0; /* the spinning thread ends with the process */
}

/* ---- end -------------------------------------------------------------- */

static const char *end_how;

static void *ender(void *arg)
{
    double end = *(double *)arg;
    while (now() < end)
        end_burn();
    printf("ending by %s\n", end_how);
    fflush(stdout);
    if (strcmp(end_how, "thread-exit") == 0)
        exit(3);
    if (strcmp(end_how, "_exit") == 0)
        _exit(4);
    if (strcmp(end_how, "abort") == 0)
        abort();
    if (strcmp(end_how, "exec") == 0) {
        execl("/bin/sh", "sh", "-c", "echo exec-ed; exit 5", (char *)NULL);
        _exit(99);
    }
    return NULL;
}

static int run_end(const char *how, double delay)
{
    end_how = how;
    double end = now() + delay;
    pthread_t t, other;
    pthread_create(&other, NULL, open_thread, &end);
    pthread_create(&t, NULL, ender, &end);
    pthread_join(t, NULL);
    pthread_join(other, NULL);
    return 6;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && strcmp(argv[1], "threads") == 0)
        return run_threads(atol(argv[2]), argc > 3 ? atof(argv[3]) : 0);
    if (argc >= 3 && strcmp(argv[1], "masked") == 0)
        return run_masked(atof(argv[2]));
    if (argc >= 4 && strcmp(argv[1], "recurse") == 0) {
        deep_secs = atof(argv[3]);
        signal(SIGUSR1, on_usr1);
        long r = recurse(atol(argv[2]));
        printf("recursed, returned %ld\n", r);
        free(deep_kept);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "dlheap") == 0) {
        signal(SIGUSR1, on_usr1);
        return run_dlheap(argv[2], atof(argv[3]));
    }
    if (argc >= 3 && strcmp(argv[1], "loader") == 0)
        return run_loader(atof(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "forks") == 0)
        return run_forks(atof(argv[2]), argc > 3 ? argv[3] : NULL);
    if (argc >= 3 && strcmp(argv[1], "allocator") == 0)
        return run_allocator(atol(argv[2]), argc > 3 ? argv[3] : NULL);
    if (argc >= 3 && strcmp(argv[1], "iconv") == 0)
        return run_iconv(atof(argv[2]));
    if (argc >= 4 && strcmp(argv[1], "end") == 0)
        return run_end(argv[2], atof(argv[3]));
    fprintf(stderr, "usage: see the comment at the top of hostile.c\n");
    return 2;
}
