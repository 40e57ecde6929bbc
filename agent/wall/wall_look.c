/*
 * One tick of the wall profile: the session's thread looks at up to
 * WALL_LOOK_MAX host threads (a round robin over the list of threads) and
 * charges each one the wall time the tick stands for, with a stack, a
 * state and the system call it is in.
 *
 * What a look reads, per thread, cheapest first (the figures are in
 * docs/wall.md, "Cost"):
 *  - its CPU clock (one clock_gettime). When it has not moved since a
 *    look found the thread blocked at least UNMOVED_MIN_NS before, the
 *    thread has not run since: it is where that look found it, and is
 *    charged that look's stack, call and state without reading /proc at
 *    all (a thread woken meanwhile but not yet on a CPU is charged as
 *    still blocked: the one thing this cannot see, and the reason for the
 *    second's wait: see UNMOVED_MIN_NS).
 *  - otherwise /proc/self/task/TID/syscall, through the threads folder the
 *    session holds open (proc_task_read: one openat, read, close), and
 *    /proc/self/task/TID/stat (name, state letter) only for a thread
 *    blocked somewhere new or one whose name was last read STAT_EVERY
 *    looks ago. Then:
 *  - "running" in the syscall file (the thread is runnable or on a CPU):
 *    state running or runnable drawn from its CPU time and its wait for
 *    a CPU (schedstat) since the previous read (on_cpu_state);
 *    its stack is the most recent one its own CPU-time timer took
 *    (wall_signal.c), when it took one since it was armed (its voluntary
 *    context switches, from its status file, tell whether it slept since).
 *    A thread that has none yet (it was just armed) owes the charge until
 *    its first stack arrives, at most OWED_MAX_NS later. One that has not
 *    used its CPU since a look that saw it blocked has not left that call
 *    yet: it is charged that call's stack, runnable.
 *  - a process that is not dumpable cannot read its syscall files: a
 *    thread stat shows R is taken as running, a sleeping one is walked
 *    from where the hook of the call it waits in noted it entered
 *    (look_noted, agent/threads/blocked.h), or charged FRAME_NOT_NOTED.
 *  - blocked in a system call (S or D): walked where it stands from its
 *    stack pointer and a copy of its stack (threads_walk_blocked, no
 *    signal), the walk kept while the thread waits in the same call at
 *    the same stack pointer and address (a thread parked in one place is
 *    walked once); state sleeping or disk, the call's name.
 * Timers: armed on a thread seen running, disarmed on one seen blocked
 * that has used no CPU since its previous look (it slept the whole time
 * between the two looks).
 *
 * The list of threads is read again (getdents of /proc/self/task: about
 * 0.3 ms for 1,000 threads) only when it may have changed: the folder's
 * link count (one fstat a tick) differs from the number listed, a host
 * thread ended through the exit hook, a look found its thread gone, or
 * RELIST_MAX_NS passed (a thread that started and one that ended between
 * two ticks without passing the hooks leave the count as it was).
 *
 * How many: every thread when there are at most WALL_LOOK_MAX; else
 * WALL_LOOK_MAX, a round robin, at every tick or every few ticks as the
 * cost governor (wall_cost.c) allows.
 *
 * Weights: with n threads and k looked at in a tick, each look stands for
 * n / k ticks of that thread, each tick for the wall time since the
 * previous one, k being the number of looks made in that tick: a tick's
 * charges add up to n times its wall time, and each thread's chance of
 * being looked at in it is k / n, so a thread's expected charge is the
 * profile's duration however k moves from one tick to the next (with the
 * host's load, say).
 *
 * Context: the HTTP worker holding the session (wall_timer.c). Allocates.
 */
#include "agent/wall/wall.h"
#include "agent/core/real.h"

#include "agent/threads/blocked.h"
#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/host/fds.h"
#include "agent/core/hash.h"
#include "agent/core/own_memory.h"
#include "agent/host/proc.h"
#include "agent/stacks/stack.h"
#include "agent/threads/threads.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* The list of threads is read again at least this often, ns; the unwind
 * tables are brought up to date, and the threads folder checked, every
 * REFRESH_NS. */
#define RELIST_MAX_NS 10000000000LL
#define REFRESH_NS 1000000000LL
/* How long a running look waits for its thread's first stack, ns. */
#define OWED_MAX_NS 1000000000LL
/* A thread whose CPU clock has not moved since a look found it blocked
 * at least this long ago is charged as that look found it, without
 * reading /proc; the one thing missed is a thread woken meanwhile and not
 * yet on a CPU, at most (its wait for a CPU) / UNMOVED_MIN_NS of such
 * looks. Below it (fewer than about 16 x PPROF_WALL_HZ threads, each
 * looked at more often than this), every look reads its syscall file. */
#define UNMOVED_MIN_NS 1000000000LL
/* Looks that read /proc between two reads of a thread's stat when it
 * stays where it was (its name may have changed). */
#define STAT_EVERY 8

const char *wall_state_name(int state)
{
    switch (state) {
    case WALL_RUNNING: return "running";
    case WALL_RUNNABLE: return "runnable";
    case WALL_SLEEPING: return "sleeping";
    case WALL_DISK: return "disk";
    default: return "other";
    }
}

static int by_tid(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int wall_look_init(struct wall_looker *l)
{
    memset(l, 0, sizeof *l);
    wall_cost_init(&l->cost, (double)opt_wall_cost / 1000);
    l->draw = (uint64_t)agent_now_ns();
    void *p = mmap(NULL, THREADS_COPY_MAX, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    own_memory_add(p, THREADS_COPY_MAX);
    l->copy = p;
    return 0;
}

void wall_look_free(struct wall_looker *l)
{
    if (l->copy) {
        own_memory_remove(l->copy, THREADS_COPY_MAX);
        munmap(l->copy, THREADS_COPY_MAX);
    }
    real_free(l->tids);
    memset(l, 0, sizeof *l);
}

/* ---- /proc --------------------------------------------------------------- */

/* /proc/self/task/TID/FILE into buf: through the folder the session
 * holds, or by path when it could not be opened. Counted. */
static ssize_t task_read(struct wall_looker *l, int tid, const char *file,
                         char *buf, size_t size)
{
    l->c.reads++;
    return proc_task_read(&wall_tasks_fd, tid, file, buf, size);
}

static int read_syscall(struct wall_looker *l, int tid,
                        struct thread_syscall *st)
{
    l->c.reads++;
    return threads_read_syscall_at(&wall_tasks_fd, tid, st);
}

/* The thread's state letter and name (t->name) from its stat; '?' when
 * it cannot be read. */
static char read_stat(struct wall_looker *l, struct wall_thread *t)
{
    char buf[512];
    if (task_read(l, t->tid, "stat", buf, sizeof buf) <= 0)
        return '?';
    return proc_parse_stat(buf, t->name, sizeof t->name);
}

/* The thread's voluntary context switches (times it slept) from its
 * status, or ~0 when they cannot be read. */
static uint64_t read_nvcsw(struct wall_looker *l, int tid)
{
    char buf[2048];
    if (task_read(l, tid, "status", buf, sizeof buf) <= 0)
        return ~0ULL;
    const char *p = strstr(buf, "\nvoluntary_ctxt_switches:");
    return p ? strtoull(p + 25, NULL, 10) : ~0ULL;
}

/* 1 when a stack taken at a count of voluntary switches belongs to the
 * run the thread is in at count now (either unknown: taken as so). */
static int same_run(uint64_t taken, uint64_t now)
{
    return taken == ~0ULL || now == ~0ULL || taken == now;
}

/*
 * The thread's time awake since its schedstat was last read, the one
 * interval on_cpu_state and awake_part both use: *ran, its time on a CPU,
 * from its CPU clock (cpu, read just before: exact per thread), and
 * *waited, its time waiting on a run queue, from schedstat, which alone
 * has it (the kernel adds a wait when it ends). Not schedstat's own run
 * time: it is the sum the CPU clock reads, updated when the scheduler
 * accounts (its ticks and switches), so up to a tick behind for a thread
 * on a CPU: a second source for one quantity. -1 for what is not known:
 * at the first read, and a wait when schedstat cannot be read or is all
 * zeros (a kernel without scheduler statistics).
 */
static void awake_delta(struct wall_looker *l, struct wall_thread *t,
                        int64_t cpu, int64_t *ran, int64_t *waited)
{
    char buf[128];
    long long run = 0, wait = -1;
    if (task_read(l, t->tid, "schedstat", buf, sizeof buf) > 0) {
        char *end;
        run = strtoll(buf, &end, 10);
        wait = strtoll(end, NULL, 10);
    }
    if (run <= 0)
        wait = -1;
    int seen = t->sched_seen && cpu >= t->sched_cpu;
    *ran = seen ? cpu - t->sched_cpu : -1;
    *waited = seen && wait >= t->wait_ns && t->wait_ns >= 0
                  ? wait - t->wait_ns
                  : -1;
    t->sched_seen = 1;
    t->sched_cpu = cpu;
    t->wait_ns = wait;
}

/*
 * Running or runnable, for the time a thread was awake: drawn with the
 * share of its awake time it spent on a CPU since its schedstat was last
 * read (ran, waited: awake_delta), not from the instant of the look: the
 * look's own wake-up takes a CPU, on a busy machine often the one the
 * thread was on, so the instant's view (did its CPU clock move while it
 * was looked at) called a thread that ran 97% of the time runnable at
 * half the looks. So every thread's running time comes out as its CPU
 * time, whatever the looks' timing. The instant's view stays for the
 * first look, and where schedstat cannot be read.
 */
static int on_cpu_state(struct wall_looker *l, int64_t ran, int64_t waited,
                        int instant)
{
    if (ran < 0 || waited < 0 || ran + waited <= 0)
        return instant;
    uint64_t x = hash_splitmix64(l->draw += HASH_GOLDEN);
    return x % (uint64_t)(ran + waited) < (uint64_t)ran ? WALL_RUNNING
                                                        : WALL_RUNNABLE;
}

static int64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* The walk's key: the call, the stack pointer and the address it returns
 * to. Not the arguments: a futex word's value or a timeout changes from
 * one wait to the next while the thread waits at the same place, under
 * the same callers. */
static uint64_t walk_key(const struct thread_syscall *st)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    h = (h ^ (uint64_t)st->nr) * 0x100000001b3ULL;
    h = (h ^ st->sp) * 0x100000001b3ULL;
    h = (h ^ st->pc) * 0x100000001b3ULL;
    return h ? h : 1;
}

/* 1 when the thread's walk of the call it waited in is kept. */
static int walk_kept(const struct wall_thread *t)
{
    return t->walk_key && t->walk_status == THREAD_STACK_OK;
}

/* ---- charges ------------------------------------------------------------- */

typedef int (*charge_fn)(const struct wall_charge *c, void *arg);

static int charge(charge_fn fn, void *arg, const struct wall_thread *t,
                  const uintptr_t *pcs, int depth, int state, long nr,
                  int64_t ns, int64_t count)
{
    static const uintptr_t unavailable = FRAME_UNAVAILABLE;
    struct wall_charge c = {
        .pcs = depth > 0 ? pcs : &unavailable,
        .depth = depth > 0 ? depth : 1,
        .state = state,
        .syscall = nr,
        .thread = t->name,
        .ns = ns,
        .count = count,
    };
    return fn(&c, arg);
}

/* Charges what t owes with the stack pcs (depth 0: none came). */
static int settle(struct wall_looker *l, struct wall_thread *t,
                  const uintptr_t *pcs, int depth, charge_fn fn, void *arg)
{
    int err = 0;
    if (depth == 0)
        l->c.no_stack += t->owed_count[0] + t->owed_count[1];
    for (int i = 0; i < 2 && !err; i++)
        if (t->owed_count[i] || t->owed_ns[i] > 0)
            err = charge(fn, arg, t, pcs, depth,
                         i ? WALL_RUNNABLE : WALL_RUNNING, -1, t->owed_ns[i],
                         t->owed_count[i]);
    t->owed_ns[0] = t->owed_ns[1] = 0;
    t->owed_count[0] = t->owed_count[1] = 0;
    t->owing = 0;
    return err;
}

/* Settles with a stack of a later burst (wall_bursts.c): the running looks
 * take it; the runnable ones were waiting for a CPU, mostly on the way out
 * of the wait before their burst (a burst is short), and take the stack
 * of that wait when it was walked. */
static int settle_later(struct wall_looker *l, struct wall_thread *t,
                        const uintptr_t *pcs, int depth, charge_fn fn,
                        void *arg)
{
    int err = 0;
    if (t->owed_count[1] || t->owed_ns[1] > 0) {
        int walked = walk_kept(t);
        if (!walked)
            l->c.no_stack += t->owed_count[1];
        err = charge(fn, arg, t, walked ? t->walk_pcs : NULL,
                     walked ? t->walk_depth : 0, WALL_RUNNABLE,
                     walked ? t->walk_nr : -1, t->owed_ns[1],
                     t->owed_count[1]);
        t->owed_ns[1] = 0;
        t->owed_count[1] = 0;
    }
    int err2 = settle(l, t, pcs, depth, fn, arg);
    return err ? err : err2;
}

/* The owed charges whose stack has come, or that waited long enough. */
static int settle_owed(struct wall_looker *l, int64_t now, int all,
                       charge_fn fn, void *arg)
{
    int err = 0;
    size_t kept = 0;
    for (size_t i = 0; i < l->nowed; i++) {
        struct wall_thread *t = &wall_threads[l->owed[i]];
        if (!t->owing)
            continue;
        uintptr_t pcs[WALL_STACK_MAX];
        int depth = 0;
        uint64_t nv;
        int later = 0;
        if (wall_slot_read(&wall_slots[l->owed[i]], t->owed_seq, pcs, &depth,
                           &nv) == 0) {
            depth = 0;
        } else if (!same_run(nv, t->owed_nvcsw)) {
            /* It slept before its stack was taken: not the place it was
             * looked at, unless it runs in bursts (wall_bursts.c). */
            wall_bursts_count_owed(t, 0);
            later = wall_bursts_loop(t);
            if (!later)
                depth = 0;
        } else {
            wall_bursts_count_owed(t, 1);
        }
        int came = depth > 0 || wall_slots[l->owed[i]].seq > t->owed_seq;
        if (came || all || now - t->owed_since >= OWED_MAX_NS) {
            if (!err)
                err = later ? settle_later(l, t, pcs, depth, fn, arg)
                            : settle(l, t, pcs, depth, fn, arg);
            if (!came)
                /* No stack came: a timer that died with an earlier
                 * thread of the same id is made anew at the next arming. */
                wall_thread_disarm(t);
            continue;
        }
        l->owed[kept++] = l->owed[i];
    }
    l->nowed = kept;
    return err;
}

/* ---- one look ------------------------------------------------------------ */

/* One look at one thread: its entry, the wall time it is charged and its
 * CPU clock, with what its previous look left (read before this one
 * overwrites it). */
struct look {
    struct wall_looker *l;
    struct wall_thread *t;
    uint32_t e;           /* t's index in wall_threads and wall_slots */
    int tid;
    int64_t now;          /* the tick's monotonic time */
    int64_t ns;           /* the wall time the look stands for */
    int64_t cpu0;         /* the thread's CPU clock at the look's start */
    int64_t prev_cpu;     /* and at its previous look */
    int64_t prev_look;    /* when its previous look was */
    int prev_blocked;     /* its previous look found it blocked (walked) */
    uint32_t seq_before;  /* its slot's count at its previous look */
    /* Its time on a CPU and waiting for one since its schedstat was last
     * read (awake_delta), -1 not known or not read by this look. */
    int64_t ran, waited;
    charge_fn fn;
    void *arg;
};

static int charge_look(const struct look *k, const uintptr_t *pcs, int depth,
                       int state, long nr)
{
    return charge(k->fn, k->arg, k->t, pcs, depth, state, nr, k->ns, 1);
}

/* Charged where the thread is, its address alone (none when pc is 0). */
static int charge_at(const struct look *k, uintptr_t pc, int state, long nr)
{
    return charge_look(k, &pc, pc ? 1 : 0, state, nr);
}

static void disarm(struct wall_looker *l, struct wall_thread *t)
{
    wall_thread_disarm(t);
    l->c.disarms++;
}

/* Its owed looks' run ended before its timer took a stack (wall_bursts.c):
 * counted as missed, settled without a stack. */
static int settle_missed(const struct look *k)
{
    wall_bursts_count_owed(k->t, 0);
    return settle(k->l, k->t, NULL, 0, k->fn, k->arg);
}

static int blocked_state(char letter)
{
    return letter == 'D'   ? WALL_DISK
           : letter == 'T' || letter == 't' || letter == 'Z' || letter == 'X'
               ? WALL_OTHER
               : WALL_SLEEPING;
}

/* Not on a CPU since a look found it blocked in a call at least
 * UNMOVED_MIN_NS ago: it is still in that call, or woken from it and
 * waiting for a CPU, which only its syscall file could tell apart
 * ("running"). */
static int unmoved(const struct look *k)
{
    return k->prev_blocked && k->cpu0 == k->prev_cpu &&
           k->now - k->prev_look >= UNMOVED_MIN_NS && walk_kept(k->t) &&
           !k->t->owing;
}

/* An unmoved thread is charged as that look found it, without reading
 * /proc. */
static int look_unmoved(const struct look *k)
{
    struct wall_looker *l = k->l;
    struct wall_thread *t = k->t;
    l->c.looks++;
    l->c.unmoved++;
    if (t->prev_state == WALL_RUNNABLE)
        l->c.runnable++;
    else
        l->c.blocked++;
    if (t->armed)
        disarm(l, t);
    return charge_look(k, t->walk_pcs, t->walk_depth, t->prev_state,
                       t->walk_nr);
}

/* The thread's system call into st (nr -1: running), or nr -2 when its
 * file cannot be read (*unreadable set). -ESRCH when it ended. */
static int read_call(const struct look *k, struct thread_syscall *st,
                     int *unreadable)
{
    *unreadable = 0;
    if (read_syscall(k->l, k->tid, st) == 0)
        return 0;
    /* Ended (a file that cannot be read of a thread that is still there
     * does not make the list stale). */
    if (threads_cpu_ns(k->tid) < 0) {
        k->l->gone = 1;
        return -ESRCH;
    }
    /* Alive, but its syscall file cannot be read: a process that changed
     * its user is not dumpable, and its /proc files are then root's (or
     * /proc is missing after a chroot). The state letter (stat is
     * everyone's) still tells running from blocked; a blocked thread gets
     * no stack. */
    memset(st, 0, sizeof *st);
    st->nr = -2;
    *unreadable = 1;
    k->l->c.unreadable++;
    /* From now on the hooks note where threads block (look_noted). */
    if (!__atomic_load_n(&blocked_notes_on, __ATOMIC_RELAXED))
        blocked_notes_switch_on();
    return 0;
}

/* Name and state letter (t->letter): read again unless the thread waits
 * where it waited at its previous look (its walk kept) or runs (the
 * letter is not used), and at least every STAT_EVERY looks for a name it
 * may have changed. -ESRCH when its stat cannot be read. */
static int read_letter(const struct look *k, const struct thread_syscall *st)
{
    struct wall_thread *t = k->t;
    int parked = st->nr >= 0 && t->walk_key && walk_key(st) == t->walk_key;
    if (t->letter && (parked || st->nr == -1) && t->stat_age < STAT_EVERY) {
        t->stat_age++;
        return 0;
    }
    if ((t->letter = read_stat(k->l, t)) == '?') {
        k->l->gone |= threads_cpu_ns(k->tid) < 0;
        return -ESRCH;
    }
    t->stat_age = 0;
    return 0;
}

/* A running look with a stack of the thread's current run (it has not
 * slept since the stack was taken, at nv_cap voluntary switches): charged
 * with it. What it owes from an earlier run gets none, unless it runs in
 * bursts (wall_bursts.c). */
static int charge_this_run(const struct look *k, const uintptr_t *pcs,
                           int depth, uint64_t nv_cap, int state)
{
    struct wall_thread *t = k->t;
    int err = 0;
    if (t->owing) {
        int same = same_run(t->owed_nvcsw, nv_cap);
        wall_bursts_count_owed(t, same);
        if (same)
            err = settle(k->l, t, pcs, depth, k->fn, k->arg);
        else if (wall_bursts_loop(t))
            err = settle_later(k->l, t, pcs, depth, k->fn, k->arg);
        else
            err = settle(k->l, t, NULL, 0, k->fn, k->arg);
    }
    return err ? err : charge_look(k, pcs, depth, state, -1);
}

/* A running look without a stack of this run: slept since its last stack
 * (on its way out of a call no look saw, or running for less than a
 * timer period since), or none yet. Owed to its next stack (seq: the
 * newest it has, 0 none), if taken before it sleeps again (nv_now
 * voluntary switches). */
static int owe(const struct look *k, int state, uint32_t seq, uint64_t nv_now)
{
    struct wall_looker *l = k->l;
    struct wall_thread *t = k->t;
    if (t->owing && !same_run(t->owed_nvcsw, nv_now) &&
        !wall_bursts_loop(t)) {
        int err = settle_missed(k);
        if (err)
            return err;
    }
    if (!t->armed) {
        if (!wall_thread_arm(t, k->now))
            /* It blocks the signal: no stack to be had. */
            return charge_look(k, NULL, 0, state, -1);
        l->c.arms++;
    }
    if (!t->owing) {
        if (l->nowed == WALL_OWED_MAX)
            return charge_look(k, NULL, 0, state, -1);
        l->owed[l->nowed++] = k->e;
        t->owing = 1;
        t->owed_since = k->now;
        t->owed_seq = seq ? seq : t->armed_seq;
        t->owed_nvcsw = nv_now;
    }
    int i = state == WALL_RUNNABLE;
    t->owed_ns[i] += k->ns;
    t->owed_count[i]++;
    l->c.owed++;
    return 0;
}

/* "running" in its syscall file (on a CPU or waiting for one); cpu1 is
 * its CPU clock after that read. */
static int look_running(const struct look *k, int64_t cpu1)
{
    struct wall_looker *l = k->l;
    struct wall_thread *t = k->t;
    int state = on_cpu_state(l, k->ran, k->waited,
                             cpu1 > k->cpu0 ? WALL_RUNNING : WALL_RUNNABLE);
    if (state == WALL_RUNNING)
        l->c.running++;
    else
        l->c.runnable++;
    /* Not on a CPU since it was seen blocked: still on its way out of that
     * call (woken, waiting for a CPU). */
    if (k->prev_blocked && k->cpu0 == k->prev_cpu && walk_kept(t)) {
        t->prev_blocked = 1;
        t->prev_state = WALL_RUNNABLE;
        return charge_look(k, t->walk_pcs, t->walk_depth, WALL_RUNNABLE,
                           t->walk_nr);
    }
    uintptr_t pcs[WALL_STACK_MAX];
    int depth = 0;
    uint64_t nv_cap;
    uint32_t seq = t->armed ? wall_slot_read(&wall_slots[k->e], t->armed_seq,
                                             pcs, &depth, &nv_cap)
                            : 0;
    uint64_t nv_now = read_nvcsw(l, k->tid);
    wall_bursts_count_runs(t, cpu1, nv_now);
    if (seq && same_run(nv_cap, nv_now))
        return charge_this_run(k, pcs, depth, nv_cap, state);
    return owe(k, state, seq, nv_now);
}

/* Blocked in system call st: walked where it stands from its stack
 * pointer, unless it waits where its kept walk found it. */
static int charge_walked(const struct look *k, struct thread_syscall *st,
                         int state)
{
    struct wall_thread *t = k->t;
    if (walk_key(st) != t->walk_key) {
        t->walk_status =
            threads_walk_blocked(&wall_tasks_fd, k->tid, st, k->cpu0,
                                 k->l->copy, t->walk_pcs, WALL_STACK_MAX,
                                 &t->walk_depth);
        t->walk_nr = st->nr;
        /* The line the walk was consistent with (st was updated). */
        t->walk_key = t->walk_status == THREAD_STACK_OK ? walk_key(st) : 0;
        k->l->c.walks++;
        if (t->walk_status != THREAD_STACK_OK)
            return charge_at(k, st->pc, state, st->nr);
    } else {
        k->l->c.walks_cached++;
    }
    t->prev_blocked = 1;
    t->prev_state = state;
    t->walk_state = state;
    return charge_look(k, t->walk_pcs, t->walk_depth, state, t->walk_nr);
}

/* What every look at a blocked thread does first: counts it, and settles
 * what it owes. It ran and slept again before its timer fired: no stack,
 * unless it runs in bursts and waits, timer armed, for its next
 * (wall_bursts.c). Returns 0 or the settlement's error. */
static int blocked_begin(const struct look *k)
{
    struct wall_looker *l = k->l;
    struct wall_thread *t = k->t;
    l->c.blocked++;
    int err = 0;
    if (t->owing && !wall_bursts_loop(t))
        err = settle_missed(k);
    if (t->armed && k->prev_cpu == k->cpu0 && !t->owing)
        disarm(l, t);
    return err;
}

/* Blocked (or stopped). */
static int look_blocked(const struct look *k, struct thread_syscall *st)
{
    int state = blocked_state(k->t->letter);
    int err = blocked_begin(k);
    if (err)
        return err;
    if (st->nr < 0 || !st->sp || !st->pc)
        /* Not in a system call (a page fault, a stop): where it is. */
        return charge_at(k, st->pc, state, -1);
    return charge_walked(k, st, state);
}

/* The key of a noted call's walk: the note's count (one per call
 * entered) and where it was entered. */
static uint64_t note_key(const struct blocked_note *n)
{
    uint64_t h = 0x84222325cbf29ce4ULL;
    h = (h ^ n->seq) * 0x100000001b3ULL;
    h = (h ^ n->cfa) * 0x100000001b3ULL;
    h = (h ^ n->ret) * 0x100000001b3ULL;
    return h ? h : 1;
}

/* Sleeping in a process that is not dumpable (its syscall file cannot be
 * read): walked from where its hook noted it entered its call, the walk
 * kept while it waits in that call; without a note, charged to
 * FRAME_NOT_NOTED (counted: the profile's comment says how much). */
static int look_noted(const struct look *k)
{
    struct wall_looker *l = k->l;
    struct wall_thread *t = k->t;
    int state = blocked_state(t->letter);
    int err = blocked_begin(k);
    if (err)
        return err;
    struct blocked_note n;
    if (!blocked_note_read(k->tid, &n)) {
        l->c.not_noted++;
        l->c.not_noted_ns += k->ns;
        t->walk_key = 0;
        return charge_at(k, FRAME_NOT_NOTED, state, -1);
    }
    uint64_t key = note_key(&n);
    if (key != t->walk_key || t->walk_status != THREAD_STACK_OK) {
        t->walk_status = threads_walk_noted(&n, k->tid, k->cpu0, l->copy,
                                            t->walk_pcs, WALL_STACK_MAX,
                                            &t->walk_depth);
        t->walk_nr = n.nr;
        t->walk_key = t->walk_status == THREAD_STACK_OK ? key : 0;
        l->c.walks++;
        if (t->walk_status != THREAD_STACK_OK)
            return charge_at(k, 0, state, n.nr);
    } else {
        l->c.walks_cached++;
    }
    l->c.noted++;
    t->prev_blocked = 1;
    t->prev_state = state;
    t->walk_state = state;
    return charge_look(k, t->walk_pcs, t->walk_depth, state, t->walk_nr);
}

/*
 * Awake share. Whether a thread is awake is read at the look's instant,
 * and the instant is not independent of the thread: a loop that sleeps a
 * few hundred microseconds at a time is often woken by the very interrupt
 * that wakes the looker (a CPU runs all its expired timers at once, and a
 * timer's slack lets it wait for one). test/programs/event_loop was seen
 * running at 33 to 128 of 490 looks while its CPU clock said 57 to 74
 * looks' worth. So a look at a thread whose runs are short
 * (wall_bursts.c) splits its wall time: the thread's awake share of the
 * time since its previous look (its CPU clock, and its schedstat's time
 * waiting for a CPU, over that time: awake_delta) is charged awake, the
 * rest blocked, whatever the instant saw. The instant decides which part takes
 * what the look found (its stack, its call); the other part is charged
 * as below, with no sample count of its own (a look is one sample).
 * Not for threads whose runs are long: their looks are not in step with
 * their wake-ups, and a look's time may span several of their waits, of
 * which a split would charge all to the one its kept walk found
 * (wall_profile's cyclers, 10 to 40 ms a phase: wait_epoll 41.7% for
 * 30.4% measured when every thread was split).
 */

/* The part of a look that found it awake which it spent blocked: where
 * its kept walk found it last, or no stack. */
static int charge_asleep(const struct look *k, int64_t ns)
{
    const struct wall_thread *t = k->t;
    if (walk_kept(t))
        return charge(k->fn, k->arg, t, t->walk_pcs, t->walk_depth,
                      t->walk_state, t->walk_nr, ns, 0);
    return charge(k->fn, k->arg, t, NULL, 0, WALL_SLEEPING, -1, ns, 0);
}

/* The part of a look that found it blocked which it spent awake: with a
 * stack its timer took since the previous look; else, as a loop that
 * runs in bursts (wall_bursts.c), with the stack its owed looks wait for,
 * or its timer's latest. */
static int charge_awoke(const struct look *k, int64_t ns)
{
    struct wall_thread *t = k->t;
    int state = on_cpu_state(k->l, k->ran, k->waited, WALL_RUNNING);
    const struct wall_slot *slot = &wall_slots[k->e];
    uintptr_t pcs[WALL_STACK_MAX];
    int depth = 0;
    uint64_t nv;
    if (t->armed && wall_slot_read(slot, k->seq_before, pcs, &depth, &nv))
        return charge(k->fn, k->arg, t, pcs, depth, state, -1, ns, 0);
    if (t->owing) {
        t->owed_ns[state == WALL_RUNNABLE] += ns;
        return 0;
    }
    if (!wall_slot_read(slot, 0, pcs, &depth, &nv) ||
        __atomic_load_n(&slot->tid, __ATOMIC_ACQUIRE) != (uint32_t)t->tid)
        depth = 0;
    return charge(k->fn, k->arg, t, pcs, depth, state, -1, ns, 0);
}

/* Reads what the thread did since its schedstat was last read
 * (awake_delta) when the look uses it: a look that finds it awake draws
 * its state from it, and one that finds a thread whose runs are short
 * blocked, having run since its previous look, splits with it. The other
 * blocked looks skip the read (a /proc read they do not need), and the
 * next read counts their time, CPU time and wait alike, over one
 * interval. A thread whose runs are short skips it only at looks that
 * found its CPU clock unmoved (no run, so no wait ended either), so the
 * figures a split uses are those since its previous look. cpu1: the CPU
 * clock this look read last (-1: the thread ended meanwhile). */
static void read_awake(struct look *k, int awake_now, int64_t cpu1)
{
    if (awake_now || (k->cpu0 > k->prev_cpu && wall_bursts_short_runs(k->t)))
        awake_delta(k->l, k->t, cpu1 >= 0 ? cpu1 : k->cpu0, &k->ran,
                    &k->waited);
}

/* The look's awake part of ns, -1 for none to split off (its first look,
 * one that found it blocked that has not run since, a thread whose runs
 * are long). */
static int64_t awake_part(const struct look *k, int64_t span)
{
    if (k->ran < 0 || span <= 0 || !wall_bursts_short_runs(k->t))
        return -1;
    int64_t awake = k->ran + (k->waited > 0 ? k->waited : 0);
    if (awake >= span)
        return -1;
    return (int64_t)((double)k->ns * (double)awake / (double)span);
}

/* The look as the instant found it, for the part of its time the thread
 * was in that state, then the other part ("Awake share"). */
static int look_split(struct look *k, struct thread_syscall *st,
                      int unreadable, int64_t cpu1, int64_t span)
{
    int awake_now = st->nr == -1;
    read_awake(k, awake_now, cpu1);
    int64_t whole = k->ns, awake = awake_part(k, span);
    if (awake >= 0)
        k->ns = awake_now ? awake : whole - awake;
    int err = awake_now    ? look_running(k, cpu1)
              : unreadable ? look_noted(k)
                           : look_blocked(k, st);
    int64_t other = whole - k->ns;
    if (err || awake < 0 || other <= 0)
        return err;
    return awake_now ? charge_asleep(k, other) : charge_awoke(k, other);
}

static int look(struct wall_looker *l, int tid, int64_t now, int64_t ns,
                charge_fn fn, void *arg)
{
    struct wall_thread *t = wall_thread_get(tid);
    if (!t)
        return charge(fn, arg, &(struct wall_thread){.name = "?"}, NULL, 0,
                      WALL_OTHER, -1, ns, 1);
    int64_t cpu0 = threads_cpu_ns(tid);
    if (cpu0 < 0) {
        l->gone = 1; /* it ended: its time up to now was charged before */
        return 0;
    }
    struct look k = {
        .l = l, .t = t, .e = (uint32_t)(t - wall_threads), .tid = tid,
        .now = now, .ns = ns, .cpu0 = cpu0, .prev_cpu = t->prev_cpu,
        .prev_look = t->looked_ns, .prev_blocked = t->prev_blocked,
        .seq_before = t->looked_seq, .ran = -1, .waited = -1,
        .fn = fn, .arg = arg,
    };
    int64_t span = t->looked_ns ? now - t->looked_ns : 0;
    t->looked_ns = now;
    t->looked_seq =
        __atomic_load_n(&wall_slots[k.e].seq, __ATOMIC_ACQUIRE) & ~1u;
    if (unmoved(&k))
        return look_unmoved(&k);
    struct thread_syscall st;
    int unreadable;
    if (read_call(&k, &st, &unreadable) != 0 || read_letter(&k, &st) != 0)
        return 0;
    if (unreadable && t->letter == 'R')
        st.nr = -1;
    int64_t cpu1 = st.nr == -1 ? threads_cpu_ns(tid) : cpu0;
    t->prev_cpu = cpu1 >= 0 ? cpu1 : cpu0;
    t->prev_blocked = 0;
    l->c.looks++;
    return look_split(&k, &st, unreadable, cpu1, span);
}

/* ---- the tick ------------------------------------------------------------ */

static int listed(const int *tids, size_t n, int tid)
{
    return bsearch(&tid, tids, n, sizeof *tids, by_tid) != NULL;
}

static int relist(struct wall_looker *l, int64_t now, charge_fn fn,
                  void *arg)
{
    size_t n, agent;
    uint32_t exits = __atomic_load_n(&wall_exits, __ATOMIC_ACQUIRE);
    int *tids = threads_list_tids(&n, &agent);
    if (!tids)
        return -ENOMEM;
    l->c.relists++;
    qsort(tids, n, sizeof *tids, by_tid);
    /* Threads that ended settle what they owed with the stack their slot
     * holds (or none) before the sweep frees their entries. */
    int err = 0;
    size_t kept = 0;
    for (size_t i = 0; i < l->nowed; i++) {
        struct wall_thread *t = &wall_threads[l->owed[i]];
        if (t->owing && !listed(tids, n, t->tid)) {
            uintptr_t pcs[WALL_STACK_MAX];
            int depth = 0;
            uint64_t nv;
            if (wall_slot_read(&wall_slots[l->owed[i]], t->owed_seq, pcs,
                               &depth, &nv) == 0 ||
                !same_run(nv, t->owed_nvcsw))
                depth = 0;
            if (!err)
                err = settle(l, t, pcs, depth, fn, arg);
            continue;
        }
        l->owed[kept++] = l->owed[i];
    }
    l->nowed = kept;
    real_free(l->tids);
    l->tids = tids;
    l->n = n;
    l->cursor = n ? l->cursor % n : 0;
    l->listed_ns = now;
    l->listed_total = (long)(n + agent);
    l->exits_seen = exits;
    l->gone = 0;
    wall_threads_sweep(tids, n);
    return err;
}

/* 1 when the threads may not be the ones listed: see the file's top. */
static int list_stale(struct wall_looker *l, int64_t now)
{
    if (!l->tids || l->gone || now - l->listed_ns >= RELIST_MAX_NS ||
        __atomic_load_n(&wall_exits, __ATOMIC_ACQUIRE) != l->exits_seen)
        return 1;
    long count = proc_tasks_count(&wall_tasks_fd);
    if (count < 0) /* no folder: once a second, as by path */
        return now - l->listed_ns >= REFRESH_NS;
    return count != l->listed_total;
}

/* Looks at the next k threads of the round robin, each charged the wall
 * time since the previous tick that looked, weighed by k (see the file's
 * top). */
static int look_some(struct wall_looker *l, size_t k, int64_t now,
                     charge_fn fn, void *arg)
{
    size_t n = l->n;
    k = k < n ? k : n;
    int64_t ns = k ? l->unlooked_ns * (int64_t)n / (int64_t)k : 0;
    int err = 0;
    int64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (size_t i = 0; i < k && !err; i++) {
        int tid = l->tids[(l->cursor + i) % n];
        err = look(l, tid, now, ns, fn, arg);
    }
    if (n)
        l->cursor = (l->cursor + k) % n;
    l->unlooked_ns = 0;
    wall_cost_spent(&l->cost, k, clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
    return err;
}

int wall_look_tick(struct wall_looker *l, int64_t now, int64_t elapsed,
                   charge_fn fn, void *arg)
{
    int64_t t0 = mono_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    /* The process's CPU clock, when due: the kernel sums every thread's
     * for it, so it is read seldom, and what that cost is measured. */
    int64_t proc = -1, proc_cpu = 0;
    if (wall_cost_host_due(&l->cost, now)) {
        proc = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        proc_cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    int err = settle_owed(l, now, 0, fn, arg);
    if (!err && !l->tids)
        err = relist(l, now, fn, arg);
    l->c.ticks++;
    l->unlooked_ns += elapsed;
    size_t k = wall_cost_plan(&l->cost, now, c0, proc, proc_cpu, l->n);
    if (!k && l->n)
        l->c.skipped++;
    /* The list is checked only by the ticks that look. */
    if (!err && k && list_stale(l, now))
        err = relist(l, now, fn, arg);
    if (now - l->refreshed_ns >= REFRESH_NS) {
        /* The objects loaded meanwhile: the handler unwinds them. */
        wall_session_refresh();
        /* The threads folder is still ours (else opened anew). */
        if (proc_tasks_check(&wall_tasks_fd) != 0)
            proc_tasks_open(&wall_tasks_fd);
        l->refreshed_ns = now;
    }
    if (!err && k)
        err = look_some(l, k, now, fn, arg);
    l->c.look_ns += mono_ns() - t0;
    l->c.look_cpu_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    return err;
}

int wall_look_finish(struct wall_looker *l, charge_fn fn, void *arg)
{
    int64_t now = mono_ns();
    int err = 0;
    /* The ticks skipped since the last looks are charged by a last one,
     * or the profile would lack up to a few ticks' wall time. */
    if (l->unlooked_ns > 0 && l->n)
        err = look_some(l, l->n < WALL_LOOK_MAX ? l->n : WALL_LOOK_MAX, now,
                        fn, arg);
    int err2 = settle_owed(l, now, 1, fn, arg);
    return err ? err : err2;
}
