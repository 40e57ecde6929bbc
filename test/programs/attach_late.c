/*
 * A host for pprof-attach whose work starts after the attach
 * (test/integration/attach_late.sh): threads it creates then, and a
 * shared object it loads then. Started without the agent; its main
 * thread looks every 5 ms for files in the directory argv[1] and does,
 * once each:
 *
 *   thread  reads pthread_create's address from its GOT (a GLOB_DAT
 *           relocation), then starts the "late" thread through its PLT,
 *           on a stack mapped for it:
 *           late_thread -> late_burn -> spin, for ever. Prints
 *           "late tid=TID door=OBJECT", OBJECT holding the address read.
 *   after   (after a detach) starts a thread through the address read
 *           at "thread" and one through the PLT, joins both; prints
 *           "after ok=N door=OBJECT", N the threads that ran (2).
 *   load    dlopens argv[2] (attach_plugin.c); prints "loaded".
 *   alloc   waits (30 s at most) until the object's malloc leads to the
 *           agent, prints "bound after MS ms door=OBJECT" (MS since the
 *           dlopen returned), then calls its plugin_allocate and prints
 *           what the allocs profile's leaf plugin_block must hold,
 *           "plugin OBJECTS BYTES".
 *   deadlock  starts "locker-a" and "locker-b", which take two mutexes in
 *           opposite orders (take_ab, take_ba) and wait for each other
 *           for ever; prints "lockers a=TID b=TID" once both hold their
 *           first.
 *   stop    exits 0 (the lockers with it).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spin.h"
#include "timing.h"

static const char *dir;
static int (*volatile creator)(pthread_t *, const pthread_attr_t *,
                               void *(*)(void *), void *);
static int late_tid;
static int ran;

static int asked(const char *what)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, what);
    return access(path, F_OK) == 0;
}

static const char *object_of(const void *p)
{
    Dl_info info;
    if (!dladdr(p, &info) || !info.dli_fname)
        return "?";
    const char *slash = info.dli_fname;
    for (const char *c = slash; *c; c++)
        if (*c == '/')
            slash = c + 1;
    return slash;
}

__attribute__((noinline)) static void late_burn(void)
{
    for (;;)
        spin(100000);
}

static void *late_thread(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "late");
    __atomic_store_n(&late_tid, (int)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
    late_burn();
    return NULL;
}

__attribute__((noinline)) static void start_late(void)
{
    creator = pthread_create;
    /* A stack larger than any the C library keeps from ended threads
     * (the agent's starter among them, whose stack was noted at the
     * attach): a new mapping. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64u << 20);
    pthread_t t;
    int err = pthread_create(&t, &attr, late_thread, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0)
        return;
    while (!__atomic_load_n(&late_tid, __ATOMIC_SEQ_CST))
        sleep_us(1000);
    printf("late tid=%d door=%s\n", late_tid, object_of((void *)creator));
}

static void *one_run(void *arg)
{
    (void)arg;
    __atomic_fetch_add(&ran, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void after_detach(void)
{
    pthread_t a, b;
    int ok = creator && creator(&a, NULL, one_run, NULL) == 0 &&
             pthread_join(a, NULL) == 0;
    ok = ok && pthread_create(&b, NULL, one_run, NULL) == 0 &&
         pthread_join(b, NULL) == 0;
    printf("after ok=%d door=%s\n", ok ? ran : 0,
           object_of((void *)creator));
}

static void *plugin;
static long loaded_ns;

static void load(const char *path)
{
    plugin = dlopen(path, RTLD_NOW);
    loaded_ns = now_ns();
    printf(plugin ? "loaded\n" : "load failed: %s\n", dlerror());
}

/* Until the plugin's malloc leads to the agent, or 60 s. */
static void wait_bound(void)
{
    void *(*where)(void) =
        plugin ? (void *(*)(void))dlsym(plugin, "plugin_malloc") : NULL;
    const char *door = "?";
    for (int i = 0; where && i < 6000; i++) {
        door = object_of(where());
        if (strncmp(door, "libpprofagent", 13) == 0)
            break;
        sleep_us(5000);
    }
    printf("bound after %ld ms door=%s\n", (now_ns() - loaded_ns) / 1000000,
           door);
}

static void allocate(void)
{
    wait_bound();
    void (*fn)(long *, long *) =
        plugin ? (void (*)(long *, long *))dlsym(plugin, "plugin_allocate")
               : NULL;
    long objects = 0, bytes = 0;
    if (fn)
        fn(&objects, &bytes);
    printf("plugin %ld %ld\n", objects, bytes);
}

/* ---- the deadlock ------------------------------------------------------ */

static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both_hold;
static int locker_tid[2];

__attribute__((noinline)) static void take_ab(void)
{
    pthread_mutex_lock(&lock_a);
    pthread_barrier_wait(&both_hold);
    pthread_mutex_lock(&lock_b);
}

__attribute__((noinline)) static void take_ba(void)
{
    pthread_mutex_lock(&lock_b);
    pthread_barrier_wait(&both_hold);
    pthread_mutex_lock(&lock_a);
}

static void *locker(void *arg)
{
    int b = arg != NULL;
    prctl(PR_SET_NAME, b ? "locker-b" : "locker-a");
    __atomic_store_n(&locker_tid[b], (int)syscall(SYS_gettid),
                     __ATOMIC_SEQ_CST);
    if (b)
        take_ba();
    else
        take_ab();
    return NULL;
}

static void deadlock(void)
{
    pthread_t t;
    pthread_barrier_init(&both_hold, NULL, 3);
    pthread_create(&t, NULL, locker, NULL);
    pthread_create(&t, NULL, locker, (void *)1);
    pthread_barrier_wait(&both_hold);
    printf("lockers a=%d b=%d\n", locker_tid[0], locker_tid[1]);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    dir = argv[1];
    int done[5] = {0, 0, 0, 0, 0};
    printf("started\n");
    fflush(stdout);
    while (!asked("stop")) {
        sleep_us(5000);
        if (!done[0] && asked("thread") && (done[0] = 1))
            start_late();
        if (!done[1] && asked("after") && (done[1] = 1))
            after_detach();
        if (!done[2] && asked("load") && (done[2] = 1))
            load(argv[2]);
        if (!done[3] && asked("alloc") && (done[3] = 1))
            allocate();
        if (!done[4] && asked("deadlock") && (done[4] = 1))
            deadlock();
        fflush(stdout);
    }
    return 0;
}
