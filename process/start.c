/*
 * The deferred start: the server starts in one small agent thread once the
 * process has lived opt_start_delay_ms (PPROF_START_DELAY_MS, 1000 by
 * default), not in the constructor.
 *
 * Most processes that load the agent through an inherited LD_PRELOAD live
 * for milliseconds: a compiler driver and the programs it runs, a shell
 * running a command, a wrapper (a pyenv shim, env, nice) that execs the
 * real program. Such a process that execs or exits before the delay pays
 * one thread creation and nothing else: no server threads, no listening
 * socket, no announcement file, no port file and no line on stderr. A
 * service lives longer and is served a moment later.
 *
 * The same thread starts a forked child's server and dumps (children.c).
 *
 * A service started as root often gives up root within that second
 * (memcached -u, dnsmasq): the credential hooks (cred_hooks.c) call
 * start_before_drop() first, which creates what needs root's rights, the
 * announcement file and the port file (empty until the server listens);
 * the server itself still starts when the delay ends, so a wrapper that
 * drops root and execs (su, gosu) binds no port and prints nothing. A
 * process that lowers RLIMIT_NPROC within the delay (HAProxy's worker)
 * could create no thread after: its start happens then, on its own thread
 * (start_before_confine).
 *
 * Contexts: start_later() in the constructor or in a fork child handler
 * (the child's only thread); the thread itself is the agent's, created
 * with the guard entered (thread_hooks.c marks it) and every signal
 * blocked (the host's signals and the profiler's never land on it, and
 * the server's threads it creates inherit that mask).
 */
#include "agent/compiler.h"
#include "process/process.h"
#include "agent/core/real.h"
#include "agent/fork_step.h"

#include "agent/core/arm.h"
#include "agent/stacks/cfi.h"
#include "agent/core/clock.h"
#include "agent/cpu/cpu.h"
#include "agent/threads/thread_hooks.h"
#include "agent/config.h"
#include "agent/guard.h"
#include "agent/heap/heap.h"
#include "agent/log.h"
#include "agent/stacks/stack.h"
#include "encoder/encoder.h"
#include "http/server.h"
#include "process/push.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Serializes the server's start with start_before_drop(). Taken by the
 * starter and by a host thread inside setuid() and the like; never held
 * across anything but the start itself. */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
/* 1 once the server was started (or its start attempted) in this process,
 * or what needs root was prepared. Under start_lock. */
static int started, prepared;
int start_attached;

/* The server listens: announce this process, then write the port file
 * (in that order: a script that waits for the port file finds the process
 * announced too). A forked child writes it only once it is no longer its
 * forking parent's (children_port_file). */
static void on_listening(int port)
{
    children_announce(port);
    if (children_port_file())
        server_write_port_file(port);
}

void start_now(void)
{
    real_pthread_mutex_lock(&start_lock);
    if (!started) {
        started = 1;
        /* The address taken: children_port0 decides whether port 0 will
         * do (with a run directory to be found in, or in a forked child). */
        struct server_listen how = {
            .addr = opt_addr,
            .addr_size = sizeof opt_addr,
            .fallback = children_port0,
            .on_listening = on_listening,
            .quiet = children_parent_lives(),
        };
        /* A worker whose parent lives leaves the configured port to it:
         * tried first, the port went to whichever of them started first
         * (nginx forks its workers within the start delay). */
        if (children_parent_lives())
            children_port0(opt_addr, sizeof opt_addr);
        server_start(&how);
    }
    real_pthread_mutex_unlock(&start_lock);
}

int start_would_serve(void)
{
    /* Not a passive descendant, a process made without fork handlers, a
     * forked child with PPROF_CHILDREN=off. */
    return opt_serve && !children_passive() && children_own() &&
           !(children_is_forked && opt_children != CHILDREN_SERVE);
}

void start_before_drop(void)
{
    /* Nothing where no server will start. */
    if (!start_would_serve())
        return;
    guard_enter(); /* the lock below is the agent's, not the host's */
    real_pthread_mutex_lock(&start_lock);
    if (!started && !prepared) {
        prepared = 1;
        if (opt_run_dir[0])
            rundir_reserve();
        if (children_port_file())
            server_reserve_port_file();
    }
    real_pthread_mutex_unlock(&start_lock);
    guard_leave();
}

/*
 * The starter's wait, which a host thread can cut short (start_pause): a
 * process that changes its credentials or its namespaces within the delay
 * (setpriv, unshare, bwrap and the like, before they exec) must be alone
 * there. unshare(CLONE_NEWUSER) and setns() into some namespaces refuse a
 * process with more than one thread, and the C library applies setuid()
 * and the like to every thread: one that cannot follow (the host gave only
 * its own thread the capability, as setpriv does with capset) makes it
 * abort the process. So the starter leaves while such a call runs and
 * comes back after it, with the same deadline.
 *
 * The starter must never be what keeps a process alive: it watches the
 * host thread it was started for (the main thread, or a forked child's
 * only one) through the word the kernel zeroes when that thread ends (its
 * clear-child-tid address), once per WATCH_NS, and leaves without starting
 * anything when it ended (killed alone, as a seccomp filter kills the
 * thread that makes a forbidden call) or when the host sandboxed itself.
 * The last thread out ends the process with the host thread's status. At
 * exit it is made to leave and joined (start_leave).
 *
 * The state belongs to the process the starter was started in
 * (starter_pid): a process made without fork handlers (a raw clone) has
 * the state but not the thread, and finds nothing to pause there.
 */
enum {
    STARTER_NONE,
    STARTER_WAITING,
    STARTER_LEAVE,
    STARTER_STARTING, /* its work under way (the starter's or a host's) */
    STARTER_DONE
};
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wait_cond;
/* Under wait_lock. */
static int starter_state;
static int starter_dumps;
/* 1 while a host thread about to lower RLIMIT_NPROC does the start's work
 * in the starter's place (start_before_confine). */
static int confining;
static pthread_t starter_thread;
static int starter_tid; /* its kernel thread id, once it runs */
static int starter_pid; /* the process it runs in */
static struct timespec deadline; /* CLOCK_MONOTONIC */
/* The watched host thread's clear-child-tid word (NULL: not watched).
 * Written before the starter is created, read by it. */
static int *host_tid_word;

/* Longest a host thread lowering RLIMIT_NPROC waits for a start under
 * way on another thread. */
#define CONFINE_WAIT_S 5

/* How often the starter looks at the host thread: a killed host thread
 * leaves its process alive this long at most. */
#define WATCH_NS 100000000L

static int pid_now(void)
{
    return (int)real_syscall(SYS_getpid);
}

/* 1 when the watched host thread ended, or the host sandboxed itself. A
 * call that may install a filter and is still running does not count:
 * syscall(SYS_seccomp, ...) does not pause the starter, and a starter that
 * looked while a probe failed left for good. */
static int nothing_to_start(void)
{
    return sandbox_installed() ||
           (host_tid_word && __atomic_load_n(host_tid_word, __ATOMIC_ACQUIRE) == 0);
}

/* One wait of the starter, WATCH_NS at most, until the deadline. Under
 * wait_lock. Returns 1 once the deadline passed. */
static int wait_slice(void)
{
    struct timespec now, until;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > deadline.tv_sec ||
        (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec))
        return 1;
    until = now;
    until.tv_nsec += WATCH_NS;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    if (until.tv_sec > deadline.tv_sec ||
        (until.tv_sec == deadline.tv_sec && until.tv_nsec > deadline.tv_nsec))
        until = deadline;
    real_pthread_cond_timedwait(&wait_cond, &wait_lock, &until);
    return 0;
}

/* Another allocator's malloc bound before the agent's: said once, on
 * stderr and in the index's notes (the heap profiles say it too). */
static void check_allocator(void)
{
    if (__atomic_load_n(&heap_enabled, __ATOMIC_ACQUIRE) <= 0 ||
        !malloc_hooks_check())
        return;
    char why[400];
    heap_hidden_text(why, sizeof why);
    log_info("%s", why);
    notes_set("heap", why);
}

/* What the starter does once the delay ended: the unwind tables (deferred
 * by stack_init; tables = 0 leaves them to the first profile or dump,
 * cfi.h), the watch, the dumps, the server and the push. On the starter,
 * or on a host thread about to lower RLIMIT_NPROC (start_before_confine),
 * with the guard entered. */
static void starter_work(int dumps, int tables)
{
    /* An attached agent binds its doors (attach_relocs.c), serves, and
     * once it serves starts the rescanner, the watch, the dumps and the
     * push, which the detach ends (attach.c). The unwind tables come
     * first: the first
     * request after pprof-attach returned walks stacks through the C
     * library. */
    if (tables)
        cfi_tables_refresh();
    if (start_attached) {
        /* The threads there before the attach: their stacks (stack.h). */
        stack_foreign_snapshot();
        /* Before the server: the profiles' words are in place for the
         * first request. */
        attach_say(attach_relocs_bind());
        if (opt_serve)
            start_now();
        attach_served();
        return;
    }
    check_allocator();
    watch_start();
    if (dumps)
        dump_start();
    if (opt_serve && (!children_is_forked || opt_children == CHILDREN_SERVE))
        start_now();
    if (!children_is_forked || opt_children == CHILDREN_SERVE)
        push_start();
}

/* The start's work is done: a host thread waiting to lower RLIMIT_NPROC
 * goes on (start_before_confine). */
static void start_work_done(void)
{
    real_pthread_mutex_lock(&wait_lock);
    starter_state = STARTER_DONE;
    confining = 0;
    pthread_cond_broadcast(&wait_cond);
    real_pthread_mutex_unlock(&wait_lock);
}

/* The starter's work on the calling host thread, about to lower
 * RLIMIT_NPROC (start_before_confine). Not LEAVE afterwards: start_resume
 * must not bring the starter back. The unwind tables are left to the
 * first profile (cfi.h): their build would hold up the host's thread
 * (150 ms in HAProxy's worker on a loaded machine). Guard entered. */
static void start_work_here(void)
{
    real_pthread_mutex_lock(&wait_lock);
    starter_state = STARTER_STARTING;
    int dumps = starter_dumps;
    real_pthread_mutex_unlock(&wait_lock);
    starter_work(dumps, 0);
    start_work_done();
}

/* The starter (unnamed: the host's name, as a thread of the process it
 * waits in), from its start to its end. */
SHELL_THREAD_MAIN(starter, NULL)
static void *starter_body(void *unused)
{
    (void)unused;
    real_pthread_mutex_lock(&wait_lock);
    __atomic_store_n(&starter_tid, (int)real_syscall(SYS_gettid), __ATOMIC_RELEASE);
    while (starter_state == STARTER_WAITING && !nothing_to_start() &&
           !wait_slice())
        ;
    if (starter_state == STARTER_LEAVE) {
        real_pthread_mutex_unlock(&wait_lock);
        return NULL; /* start_pause joins this thread */
    }
    if (nothing_to_start()) {
        starter_state = STARTER_NONE; /* nobody joins it */
        real_pthread_mutex_unlock(&wait_lock);
        pthread_detach(pthread_self());
        return NULL;
    }
    starter_state = STARTER_STARTING;
    int dumps = starter_dumps;
    real_pthread_mutex_unlock(&wait_lock);
    pthread_detach(pthread_self());
    /* The serving role may be handed down to a wrapper's child, or be
     * this process's by hand-down (role.c). */
    if (role_gate(nothing_to_start)) {
        start_work_done();
        return NULL;
    }
    /* The process lived the delay: the unwind tables (deferred by
     * stack_init) are built here, off the host's threads. */
    starter_work(dumps, 1);
    start_work_done();
    return NULL;
}

void shell_thread_begin(const char *title)
{
    if (title)
        real_pthread_setname_np(pthread_self(), title);
    cpu_agent_thread();
}

void shell_thread_end(void)
{
    cpu_agent_thread_end();
}

/* Creates the starter, waiting until the deadline. Under wait_lock. */
static int spawn_starter(void)
{
    starter_state = STARTER_WAITING;
    starter_pid = pid_now();
    thread_hooks_next_unnoted();
    int err = agent_thread_spawn(starter, NULL, &starter_thread);
    if (err)
        starter_state = STARTER_NONE;
    return err;
}

/* A forked child's start is armed (agent/core/arm.h) at the time of the
 * call: the starter is created by the child's first call that shows it
 * lives on, and waits out what is left of the delay from here. (A process
 * started by hand creates its starter at once, in the constructor: it may
 * only compute and print, and calls nothing that would fire the start.) */

/* The start's state, afresh: a forked child's came along with the fork
 * (its locks possibly held by a thread of the parent that is not here),
 * the parent's server and starter did not. No system call. */
static void state_init(int dumps, int64_t from_ns)
{
    started = 0;
    prepared = 0;
    starter_pid = 0;
    starter_state = STARTER_NONE;
    confining = 0;
    pthread_mutex_init(&start_lock, NULL);
    pthread_mutex_init(&wait_lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wait_cond, &attr);
    pthread_condattr_destroy(&attr);
    int64_t at = from_ns + opt_start_delay_ms * 1000000LL;
    deadline.tv_sec = (time_t)(at / 1000000000LL);
    deadline.tv_nsec = (long)(at % 1000000000LL);
    starter_dumps = dumps;
}

/* Creates the starter for the calling thread's process. Under wait_lock. */
static int spawn_watching(void)
{
    /* The host thread to watch: the one calling, when it is the process's
     * main thread (the constructor's, or a forked child's only thread). */
    int *word = NULL;
    host_tid_word = NULL;
    if (real_syscall(SYS_gettid) == pid_now() &&
        real_prctl(PR_GET_TID_ADDRESS, &word, 0L, 0L, 0L) == 0)
        host_tid_word = word;
    return spawn_starter();
}

static void fire(void)
{
    real_pthread_mutex_lock(&wait_lock);
    int err = starter_state == STARTER_NONE ? spawn_watching() : 0;
    real_pthread_mutex_unlock(&wait_lock);
    if (err)
        log_info("cannot start the agent's thread (%s); profiling endpoints "
                 "are off in this process",
                 log_errtext(-err));
}

FORK_PATH void start_arm(int dumps, int pid)
{
    state_init(dumps, agent_mono_ns());
    int64_t at = (int64_t)deadline.tv_sec * 1000000000LL + deadline.tv_nsec;
    arm_set(fire, at, pid);
}

int start_later(int dumps, int64_t from_ns)
{
    state_init(dumps, from_ns);
    real_pthread_mutex_lock(&wait_lock);
    int err = spawn_watching();
    real_pthread_mutex_unlock(&wait_lock);
    return err;
}

/* Makes a waiting starter leave and joins it; returns 1 when it was
 * waiting. Nothing in a process the starter was not started in (its lock
 * may be held by a thread that is not there). Guard entered. */
COMMON_PATH static int starter_leave(void)
{
    int pid = __atomic_load_n(&starter_pid, __ATOMIC_RELAXED);
    if (pid == 0 || pid != pid_now())
        return 0; /* never started here (no system call at such an exit) */
    real_pthread_mutex_lock(&wait_lock);
    int waiting = starter_state == STARTER_WAITING;
    if (waiting) {
        starter_state = STARTER_LEAVE;
        pthread_cond_broadcast(&wait_cond);
    }
    real_pthread_mutex_unlock(&wait_lock);
    if (waiting)
        real_pthread_join(starter_thread, NULL);
    return waiting;
}

COMMON_PATH void start_leave(void)
{
    guard_enter();
    starter_leave();
    guard_leave();
}

int start_pause(void)
{
    if (agent_tls.in_agent)
        return 0;
    guard_enter(); /* the lock is the agent's, not the host's */
    int waiting = starter_leave();
    if (waiting) {
        int tid = __atomic_load_n(&starter_tid, __ATOMIC_ACQUIRE);
        /* The join returns when the thread has let go of its memory; the
         * kernel takes it out of the process a moment later, and until
         * then the process has two threads (unshare -r failed so on a
         * loaded machine). Waited for, 100 ms at most. */
        struct timespec nap = {0, 50000};
        for (int i = 0; tid > 0 && i < 2000 &&
                        real_syscall(SYS_tgkill, getpid(), tid, 0) == 0;
             i++)
            real_nanosleep(&nap, NULL);
    }
    guard_leave();
    return waiting;
}

void start_resume(void)
{
    guard_enter();
    real_pthread_mutex_lock(&wait_lock);
    /* A process that entered a new PID namespace can create no thread
     * (EINVAL): it is not profiled, silently, as a process that execs
     * within the delay. */
    int err;
    if (starter_state == STARTER_LEAVE && (err = spawn_starter()) != 0)
        log_debug("cannot start the agent's thread again (%s); profiling "
                  "endpoints are off in this process",
                  log_errtext(-err));
    real_pthread_mutex_unlock(&wait_lock);
    guard_leave();
}

/*
 * Before the host forbids the agent's threads (a lower RLIMIT_NPROC:
 * cred_hooks.c), while the start delay runs: the starter is made to leave
 * and its work is done now, on the calling host thread, before the call.
 * A thread created later meets EAGAIN (HAProxy's worker sets RLIMIT_NPROC
 * to 0 once it is no longer root). This is the agent's one chance: the
 * call does not need the process to have one thread, so threads may be
 * started here. Nothing where no starter waits: the process started
 * already, will not, or is not the starter's.
 */
void start_before_confine(void)
{
    if (agent_tls.in_agent)
        return;
    /* An armed forked child: its start would come too late to create a
     * thread, so it is done here and now. */
    if (arm_take()) {
        guard_enter();
        start_work_here();
        guard_leave();
        arm_taken_done();
        return;
    }
    /* Another thread of this process may be doing it (HAProxy's threads
     * each lower the limit): its threads must exist before this call's
     * limit is in force. */
    arm_wait_taken();
    if (__atomic_load_n(&starter_pid, __ATOMIC_RELAXED) != pid_now())
        return;
    guard_enter();
    real_pthread_mutex_lock(&wait_lock);
    int waiting = starter_state == STARTER_WAITING && !nothing_to_start();
    if (waiting) {
        starter_state = STARTER_LEAVE;
        confining = 1; /* this thread does the work (below) */
        pthread_cond_broadcast(&wait_cond);
    }
    /* The work under way on another thread (the starter's, or another
     * host thread's: HAProxy's threads each lower the limit) must create
     * its threads before this call's limit is in force. Bounded: a start
     * that does not end within CONFINE_WAIT_S is not waited for longer. */
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += CONFINE_WAIT_S;
    while (!waiting && (starter_state == STARTER_STARTING || confining) &&
           real_pthread_cond_timedwait(&wait_cond, &wait_lock, &until) == 0)
        ;
    real_pthread_mutex_unlock(&wait_lock);
    if (waiting) {
        real_pthread_join(starter_thread, NULL);
        start_work_here();
    }
    guard_leave();
}

void start_wait_done(void)
{
    real_pthread_mutex_lock(&wait_lock);
    while (starter_state == STARTER_WAITING ||
           starter_state == STARTER_STARTING)
        real_pthread_cond_wait(&wait_cond, &wait_lock);
    real_pthread_mutex_unlock(&wait_lock);
}

void start_attached_reset(void)
{
    real_pthread_mutex_lock(&start_lock);
    started = 0;
    real_pthread_mutex_unlock(&start_lock);
}
