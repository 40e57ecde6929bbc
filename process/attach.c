/*
 * The agent attached to a process that was already running, and detached
 * from it again (pprof-attach, docs/attach.md).
 *
 * pprof-attach stops one host thread with ptrace, makes it call dlopen()
 * on the agent and then pprof_attach_start() with the settings of the
 * attach command's environment, and lets it go on. The constructor, loaded
 * so late, only notes it (attach_loaded_late): the host's environment is
 * never read. pprof_attach_start() builds the tables as the constructor
 * would, once, and creates the starter (start.c), which serves; it returns
 * at once. pprof_attach_stop(), called the same way, creates one agent
 * thread that stops the server and removes the announcement; the library
 * stays mapped (it is linked nodelete) but inert, and a later attach
 * starts it again.
 *
 * The host's calls to malloc and pthread_mutex_lock were bound to the C
 * library before the agent came: the starter points the loaded objects'
 * relocations of the malloc and lock functions at the agent's
 * (attach_relocs.c), the rescanner does the same for objects loaded
 * later (attach_rescan.c), and the detacher puts them back; the heap,
 * mutex and block profiles say from when they record (attach_say). The
 * watch (watch.c), the dumps (dump.c) and the push (push.c) start as
 * they would preloaded, from the attach's settings, once it serves; the
 * detacher ends them: threads joined, the last dump written and the last
 * push window sent, the dump signal given back as it was found.
 *
 * Contexts: attach_loaded_late() in the constructor (inside dlopen, on the
 * stopped host thread); pprof_attach_start() and pprof_attach_stop() on a
 * host thread that pprof-attach made call them, which must come back
 * quickly: no wait, no join there. Never called in signal context.
 */
#include "process/process.h"

#include "agent/stacks/objects.h"
#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/locks/contention.h"
#include "agent/fork.h"
#include "agent/guard.h"
#include "agent/heap/heap.h"
#include "agent/core/loader.h"
#include "agent/log.h"
#include "agent/core/ops.h"
#include "http/server.h"
#include "process/push.h"

#include <link.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What pprof-attach reads (by the symbol, from /proc/PID/mem) to know
 * where the agent stands; written by the agent only. */
enum {
    ATTACH_NONE = 0,      /* loaded by an attach and not serving (or never) */
    ATTACH_ON = 1,        /* attached: the starter was created */
    ATTACH_LEAVING = 2,   /* a detach is under way */
    ATTACH_PRELOADED = 3, /* loaded from the start: nothing to attach */
    ATTACH_SERVING = 4,   /* attached, and pprof_attach_address is written */
    ATTACH_FAILED = 5     /* the last attach could not serve (detached) */
};
__attribute__((visibility("default"))) volatile int pprof_attach_state;
/* "host:port" where the attached agent serves ("" with PPROF_ADDR=off),
 * written before the state turns ATTACH_SERVING. */
__attribute__((visibility("default"))) char pprof_attach_address[256];

/* Return codes of the two calls, which pprof-attach turns into its
 * messages. */
enum {
    ATTACH_OK = 0,
    ATTACH_ERR_PRELOADED = 1,
    ATTACH_ERR_ATTACHED = 2,
    ATTACH_ERR_LEAVING = 3,
    ATTACH_ERR_NOT_ATTACHED = 4,
    ATTACH_ERR_SETTINGS = 5,
    ATTACH_ERR_THREAD = 6
};

/* The settings of the last attach, "NAME=value" lines, and the entries
 * config_load_from() points into: they must outlive it (config_env()
 * answers from them for the life of the process). Written only by
 * pprof_attach_start() while no attach is on. */
#define SETTINGS_MAX 16384
#define ENTRIES_MAX 63
static char settings_text[SETTINGS_MAX];
static char *settings_entries[ENTRIES_MAX + 1];

static int tables_built;
static int64_t attached_at_ns; /* CLOCK_REALTIME of the last attach */

/* One object of the loader's list, as the constructor sees it. */
struct order {
    uintptr_t self; /* an address inside the agent */
    int libc_seen;  /* the C library came before the agent */
    int late;       /* the answer */
    int done;
};

STARTUP static int look_at_object(struct dl_phdr_info *info, size_t size,
                                  void *arg)
{
    (void)size;
    struct order *o = arg;
    if (o->done)
        return 1;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libc.so.", 8) == 0)
        o->libc_seen = 1;
    if (phdr_holds(info, o->self)) {
        o->late = o->libc_seen;
        o->done = 1;
        return 1;
    }
    return 0;
}

/*
 * A preloaded object (LD_PRELOAD or /etc/ld.so.preload) comes right after
 * the program in the loader's list, before the C library it needs; an
 * object dlopen'd later comes after it.
 */
STARTUP int attach_loaded_late(void)
{
    struct order o = {.self = (uintptr_t)&attach_loaded_late};
    if (real_dl_iterate_phdr)
        real_dl_iterate_phdr(look_at_object, &o);
    pprof_attach_state = o.late ? ATTACH_NONE : ATTACH_PRELOADED;
    return o.late;
}

/* Splits text (copied into settings_text) into settings_entries. Returns
 * 0 or -1 when it does not fit. */
static int take_settings(const char *text)
{
    size_t n = text ? strlen(text) : 0;
    if (n >= sizeof settings_text)
        return -1;
    memcpy(settings_text, text ? text : "", n + 1);
    int count = 0;
    char *p = settings_text;
    while (*p) {
        char *end = strchr(p, '\n');
        if (end)
            *end = '\0';
        if (strchr(p, '=')) {
            if (count == ENTRIES_MAX)
                return -1;
            settings_entries[count++] = p;
        }
        if (!end)
            break;
        p = end + 1;
    }
    settings_entries[count] = NULL;
    return 0;
}

/* The time of the attach as 2006-01-02T15:04:05Z. */
static void attach_time_text(char *when, size_t size)
{
    time_t secs = (time_t)(attached_at_ns / 1000000000LL);
    struct tm tm;
    log_snprintf(when, size, "%s", "?");
    if (!clock_gmtime_r(&secs, &tm))
        return;
    /* log_snprintf pads nothing: two digits by hand. */
    int f[] = {tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec};
    char d[5][3];
    for (int i = 0; i < 5; i++) {
        d[i][0] = (char)('0' + f[i] / 10 % 10);
        d[i][1] = (char)('0' + f[i] % 10);
        d[i][2] = '\0';
    }
    log_snprintf(when, size, "%d-%s-%sT%s:%s:%sZ", tm.tm_year + 1900, d[0],
                 d[1], d[2], d[3], d[4]);
}

/* What the heap and contention profiles say about the attach, with its
 * time: what they hold once the doors are bound, or why they are empty
 * when none could be. Never an empty profile without a word. */
void attach_say(int bound)
{
    char when[64], why[400];
    attach_time_text(when, sizeof when);
    if (bound > 0)
        log_snprintf(why, sizeof why,
                     "since attach at %s: the agent was attached to a process "
                     "already running; allocations and lock waits made "
                     "before it are not recorded (nor the frees of blocks "
                     "allocated before it), nor those of an object loaded "
                     "after it until the agent finds it (0.25 s at most)",
                     when);
    else
        log_snprintf(why, sizeof why,
                     "the agent was attached at %s to a process already "
                     "running: allocations and lock waits do not reach it "
                     "(its interposers could not be bound); start the "
                     "process with LD_PRELOAD for the heap, allocs, mutex "
                     "and block profiles",
                     when);
    heap_hidden_set(why);
    contention_unseen_set(why);
}

/* The answer of the last pprof_attach_start() or pprof_attach_stop(),
 * also their return value: pprof-attach reads it here, since its calls
 * return through a signal frame that puts the thread's own registers
 * back (attach/remote_call.c). -1 until the first call. */
__attribute__((visibility("default"))) int pprof_attach_answer = -1;

static int attach_start(const char *settings)
{
    int state = __atomic_load_n(&pprof_attach_state, __ATOMIC_ACQUIRE);
    if (state == ATTACH_PRELOADED)
        return ATTACH_ERR_PRELOADED;
    if (state == ATTACH_ON || state == ATTACH_SERVING)
        return ATTACH_ERR_ATTACHED;
    if (state == ATTACH_LEAVING)
        return ATTACH_ERR_LEAVING;
    guard_enter();
    if (take_settings(settings) != 0) {
        guard_leave();
        return ATTACH_ERR_SETTINGS;
    }
    config_load_from(settings_entries);
    pprof_attach_address[0] = '\0';
    pprof_attach_state = ATTACH_ON;
    attached_at_ns = agent_now_ns();
    start_attached = 1;
    if (!tables_built) {
        tables_built = 1;
        /* Built by the starter, off the stopped host thread. */
        init_tables(1);
        children_init();
        fork_init(children_fork_prepare, children_fork_child,
                  children_after_fork);
    }
    /* The delay has passed: the process has lived long enough. */
    int err = start_later(0, agent_mono_ns() - opt_start_delay_ms * 1000000LL);
    guard_leave();
    if (err) {
        pprof_attach_state = ATTACH_NONE;
        return ATTACH_ERR_THREAD;
    }
    return ATTACH_OK;
}

/* The doors' relocations put back; the blocks the agent tracks counted
 * freed, since their frees no longer reach it (rather than left in use
 * for ever). Returns how many relocations were put back. */
static int unbind(void)
{
    int restored = attach_relocs_unbind();
    if (heap_buckets)
        heap_table_forget_all();
    return restored;
}

void attach_served(void)
{
    char addr[sizeof pprof_attach_address];
    server_address(addr, sizeof addr);
    if (opt_serve && !addr[0]) {
        /* Said on the host's stderr by the server; pprof-attach says that
         * the attach failed. A later attach may try again. */
        unbind();
        start_attached_reset();
        __atomic_store_n(&pprof_attach_state, ATTACH_FAILED, __ATOMIC_RELEASE);
        return;
    }
    memcpy(pprof_attach_address, addr, sizeof addr);
    /* The dumps' and the push's CPU profile first: the threads started
     * after it are never looked at by its first pass over the threads. */
    dump_start();
    push_start();
    attach_rescan_start();
    watch_start();
    __atomic_store_n(&pprof_attach_state, ATTACH_SERVING, __ATOMIC_RELEASE);
}

AGENT_THREAD_MAIN(detacher)
static void *detacher_run(void *arg)
{
    (void)arg;
    /* The C library's pthread_create made it: recorded, so that the
     * last drain of the dumps' CPU profile does not count it as a host
     * thread blocking the profiling signal. Not SHELL_THREAD_MAIN: its
     * state goes back after its end (below). */
    shell_thread_begin(NULL);
    /* The starter may still be starting the server: a detach right after
     * an attach waits for it rather than racing it. */
    start_wait_done();
    server_stop();
    /* The watch may write dumps; the push may be the dumps' CPU profile's
     * guest: each ends before what it uses. */
    watch_stop();
    push_stop();
    dump_stop();
    attach_rescan_stop();
    int restored = unbind();
    rundir_remove();
    /* The port it names is closed: a script must not find it. */
    if (opt_port_file[0])
        unlink(opt_port_file);
    start_attached_reset();
    log_info("detached: profiling endpoints are off, %d relocations put "
             "back (pid %d)",
             restored, (int)getpid());
    pprof_attach_address[0] = '\0';
    shell_thread_end();
    __atomic_store_n(&pprof_attach_state, ATTACH_NONE, __ATOMIC_RELEASE);
    return NULL;
}

__attribute__((visibility("default"))) int pprof_attach_start(const char *settings)
{
    int code = attach_start(settings);
    __atomic_store_n(&pprof_attach_answer, code, __ATOMIC_RELEASE);
    return code;
}

static int attach_stop(void)
{
    int state = pprof_attach_state;
    if (state == ATTACH_PRELOADED)
        return ATTACH_ERR_PRELOADED;
    if (state == ATTACH_LEAVING)
        return ATTACH_ERR_LEAVING;
    if (state != ATTACH_SERVING)
        return ATTACH_ERR_NOT_ATTACHED;
    guard_enter();
    pprof_attach_state = ATTACH_LEAVING;
    int err = agent_thread_spawn(detacher, NULL, NULL);
    if (err)
        pprof_attach_state = ATTACH_SERVING;
    guard_leave();
    return err ? ATTACH_ERR_THREAD : ATTACH_OK;
}

__attribute__((visibility("default"))) int pprof_attach_stop(void)
{
    int code = attach_stop();
    __atomic_store_n(&pprof_attach_answer, code, __ATOMIC_RELEASE);
    return code;
}
