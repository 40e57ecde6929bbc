/*
 * CPU profile sessions and per-thread samplers.
 *
 * While a profile runs, every host thread has a sampler: a task-clock perf
 * event when the profile chose those (cpu_perf.c says when, and opens
 * them), else a POSIX timer on its own CPU clock that sends the profiling
 * signal to that thread (SIGEV_THREAD_ID). What follows says "timer"; a
 * perf event is created, paused, resumed and deleted at the same points:
 * threads found in /proc/self/task when the profile starts, and threads
 * that start later (cpu_thread_started, from thread_hooks.c). The agent's
 * own threads are skipped. Timers go away with the profile; a thread that
 * exits mid-profile deletes its own (cpu_thread_exiting) and leaves its
 * name behind for the profile's thread labels. No timer exists and no
 * signal arrives while no profile runs.
 *
 * A thread that blocks the profiling signal has no armed timer: it may be
 * reading its blocked signals (signalfd, sigwait), where ours must never
 * appear. The profile's start looks at each thread's mask (sigmask.c's
 * protocol keeps that look and the arming apart from the thread's own
 * changes); a new thread keeps the mask it inherited and is armed only if
 * that leaves the signal unblocked; a thread that blocks the signal later
 * has its timer disarmed first (cpu_thread_pause, which keeps what was left
 * of the period), and re-armed with that rest when it unblocks it
 * (cpu_thread_resume), from the mask interposers: the period's phase runs
 * on across the blocked stretch, as if the clock had stopped there. A mask
 * change that leaves the profiling signal as it was touches no timer, nor
 * does one that unblocks it where no pause was (the kernel blocked it
 * for a signal handler, unseen; sigmask_hooks.c says why).
 *
 * Timers for other threads need the raw syscalls: the C library's
 * timer_create only accepts the predefined clocks. The first expiry is
 * drawn uniformly in (0, period] (as Go) so that short-lived and rarely
 * busy threads are not biased against. Timers are armed at absolute points
 * of the thread's CPU clock, so that the periods no tick noticed before a
 * timer went away are known and settled (see "settlement" below); a perf
 * event's are not: it overflows where each period ends.
 *
 * Contexts: start/drain/stop run on the one HTTP worker holding the slot;
 * the thread hooks run on host threads. The registry (tid -> timer, name)
 * is guarded by a spinlock held only around a few syscalls, never taken in
 * signal context.
 */
#include "agent/cpu/cpu.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/stacks/cfi.h"

#include "agent/core/arena.h"
#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/core/hash.h"
#include "agent/host/fds.h"
#include "agent/guard.h"
#include "agent/log.h"
#include "agent/stacks/phdr_cache.h"
#include "agent/host/proc.h"
#include "agent/host/sigmask.h"
#include "agent/host/signals.h"
#include "agent/spinlock.h"
#include "agent/stacks/stack.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int cpu_active;
int cpu_signo = SIGPROF;
int64_t cpu_period_ns = 10000000;

static int slot_taken;

/* ---- registry ------------------------------------------------------------ */

#define REG_SLOTS 16384 /* power of two; threads seen during one profile */

struct reg_entry {
    int tid; /* 0: free */
    int timer; /* kernel timer id, -1: none */
    int perf_fd; /* its perf event (cpu_perf.c), -1: none; held (fds.c) */
    int exited;
    /* The thread's open clock: its CPU time while the signal was not
     * blocked, counted from the first pause (see cpu_thread_pause). */
    int tracked;
    int paused; /* its sampler paused by cpu_thread_pause, not resumed */
    int64_t open_off; /* open clock = CPU time - open_off, while open */
    int64_t open_now; /* the open clock at the last pause */
    int64_t due; /* the open clock's first expiry */
    uint64_t taken; /* cpu_periods_taken when it began */
    /* The settlement (see settle_entry): the thread's CPU clock at its
     * timer's first expiry (0: not settled, its phase moved with a pause),
     * the periods its drained samples stood for, its CPU clock when its
     * timer went away (0: still running), the start routine of a thread
     * that ended (0: unknown), and whether it was settled. */
    int64_t first_at;
    uint64_t seen;
    int64_t end_cpu;
    uintptr_t start_fn;
    int settled;
    char name[16];
};

static struct reg_entry *reg;
static spinlock_t reg_lock;
static long reg_full; /* threads not profiled: registry full */
/* Threads that blocked the profiling signal at the last look (the start,
 * then every drain): the profile cannot see them. */
static int unseen;
static long timer_failures;

/* The situations (threads blocking the signal, the signal) the log has
 * told at the default level: each is told once a process. Every profile
 * would fill a long-lived service's log with the same line, and telling
 * each change would still repeat it whenever a count moves to and fro (a
 * pool of workers); PPROF_LOG=debug prints every one. The profile's
 * comment, the index and /debug/stats say it every time. A forked child keeps what its parent told (as a forked
 * worker keeps quiet about its address when its parent printed its own).
 * Touched by the slot's holder only (cpu_profile_stop). */
#define TOLD_MAX 16
static struct {
    int n, sig;
} told[TOLD_MAX];
static int ntold;

#define AGENT_TIDS 64
static int agent_tids[AGENT_TIDS];

static pid_t my_tid(void)
{
    return (pid_t)real_syscall(SYS_gettid);
}

static int is_agent_tid(int tid);

/* Idempotent: an agent thread the agent's pthread_create started
 * (thread_hooks.c) is recorded there, and again by the server's thread
 * start, which is the only record of civetweb's threads when the agent
 * was attached (its pthread_create then binds to the C library's). */
void cpu_agent_thread(void)
{
    int tid = (int)my_tid();
    if (is_agent_tid(tid))
        return;
    for (int i = 0; i < AGENT_TIDS; i++) {
        int zero = 0;
        if (__atomic_compare_exchange_n(&agent_tids[i], &zero, tid, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return;
    }
}

/* Frees the calling thread's record as it ends: a server stopped and
 * started again (every detach and attach) would otherwise fill the table
 * with ended threads, after which its new threads would count as the
 * host's, and a tid the kernel reuses for a host thread would be taken for
 * the agent's and never sampled. */
void cpu_agent_thread_end(void)
{
    int tid = (int)my_tid();
    for (int i = 0; i < AGENT_TIDS; i++) {
        int mine = tid;
        __atomic_compare_exchange_n(&agent_tids[i], &mine, 0, 0,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
}

static int is_agent_tid(int tid)
{
    for (int i = 0; i < AGENT_TIDS; i++)
        if (__atomic_load_n(&agent_tids[i], __ATOMIC_RELAXED) == tid)
            return 1;
    return 0;
}

int cpu_is_agent_tid(int tid)
{
    return is_agent_tid(tid);
}

/* The slot of tid: its entry, else the empty slot where it would go;
 * NULL when the table is full. reg_lock held. */
static struct reg_entry *reg_slot(int tid)
{
    unsigned h = hash_knuth32((unsigned)tid);
    for (unsigned i = 0; i < REG_SLOTS; i++) {
        struct reg_entry *e = &reg[(h + i) & (REG_SLOTS - 1)];
        if (e->tid == tid || e->tid == 0)
            return e;
    }
    return NULL;
}

/* The entry for tid, added if absent; NULL when the table is full.
 * reg_lock held. */
/* What a thread's entry knows of its sampler's run, cleared for a new
 * one. reg_lock held. */
static void reg_fresh(struct reg_entry *e)
{
    e->exited = 0;
    e->seen = 0;
    e->end_cpu = 0;
    e->start_fn = 0;
    e->settled = 0;
    e->first_at = 0;
    e->paused = 0;
}

static struct reg_entry *reg_get(int tid)
{
    struct reg_entry *e = reg_slot(tid);
    if (e && e->tid == 0) {
        e->tid = tid;
        e->timer = -1;
        e->perf_fd = -1;
        e->tracked = 0;
        e->name[0] = '\0';
        reg_fresh(e);
    }
    return e;
}

/* The entry for tid, or NULL. reg_lock held. */
static struct reg_entry *reg_find(int tid)
{
    struct reg_entry *e = reg_slot(tid);
    return e && e->tid == tid ? e : NULL;
}

/* ---- timers -------------------------------------------------------------- */

static uint64_t rand_state;

static uint64_t next_random(void)
{
    return hash_splitmix64(
        __atomic_add_fetch(&rand_state, HASH_GOLDEN, __ATOMIC_RELAXED));
}

/* Arms timer id with a first expiry drawn uniformly in (0, period]: a
 * thread re-armed often is not biased against. Returns 0 or -errno. */
static int timer_arm(int id)
{
    int64_t period = cpu_period_ns;
    int64_t first = 1 + (int64_t)(next_random() % (uint64_t)period);
    return thread_timer_set(id, first, period);
}

/* tid's CPU clock (ns), any thread of this process; 0 when it is gone. */
static int64_t thread_cpu_ns(int tid)
{
    /* The kernel's per-thread CPU clock id (glibc's pthread_getcpuclockid
     * for a thread id): ~tid << 3, per-thread, the scheduler's clock. */
    clockid_t clk = (clockid_t)((~(unsigned)tid << 3) | 6);
    struct timespec ts;
    if (real_syscall(SYS_clock_gettime, clk, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A sampler's first expiry, at an absolute CPU time of a thread whose
 * clock reads now, drawn uniformly in (now, now + period], which *first_at
 * receives. A thread born during the profile (birth) has its expiries
 * counted from its clock's 0, the CPU its start took before this
 * included: the first one drawn in (0, period], the sampler armed at the
 * first one still ahead (returned), and one already behind is settled
 * when its sampler goes away. */
static int64_t first_expiry(int64_t now, int birth, int64_t *first_at)
{
    int64_t period = cpu_period_ns;
    int64_t first = (birth ? 0 : now) + 1 +
                    (int64_t)(next_random() % (uint64_t)period);
    int64_t at = first;
    if (at <= now)
        at += ((now - at) / period + 1) * period;
    *first_at = first;
    return at;
}

/* Arms timer id on tid's clock with its first expiry at first_expiry's
 * absolute CPU time, whose draw *first_at receives (0 when the clock
 * could not be read: no settlement). Returns 0 or -errno. */
static int timer_arm_at(int id, int tid, int birth, int64_t *first_at)
{
    int64_t period = cpu_period_ns;
    int64_t now = thread_cpu_ns(tid);
    if (now <= 0) {
        *first_at = 0;
        return timer_arm(id);
    }
    int64_t first;
    int64_t at = first_expiry(now, birth, &first);
    struct itimerspec its = {
        .it_interval = {period / 1000000000, period % 1000000000},
        .it_value = {at / 1000000000, at % 1000000000},
    };
    if (real_syscall(SYS_timer_settime, id, TIMER_ABSTIME, &its, NULL) != 0)
        return -errno;
    *first_at = first;
    return 0;
}

/* Creates and arms a timer on tid's CPU clock. Returns the kernel timer
 * id or -errno. */
static int timer_start(int tid, int birth, int64_t *first_at)
{
    int id = thread_timer_create(tid, cpu_signo,
                                 (CPU_TIMER_COOKIE << 32) | (uint32_t)tid);
    if (id < 0)
        return id;
    int err = timer_arm_at(id, tid, birth, first_at);
    if (err) {
        real_syscall(SYS_timer_delete, id);
        return err;
    }
    return id;
}

static void timer_stop(int id)
{
    if (id >= 0)
        real_syscall(SYS_timer_delete, id);
}

static int armed(const struct reg_entry *e)
{
    return e->timer >= 0 || e->perf_fd >= 0;
}

/* Stops the thread's sampler, whichever it has. reg_lock held. */
static void disarm(struct reg_entry *e)
{
    timer_stop(e->timer);
    e->timer = -1;
    cpu_perf_close(&e->perf_fd);
}

/* Gives tid a sampler: the profile's perf event (cpu_perf.c chose), else
 * a timer; a fresh one (stopping one it had) for a thread born now, whose
 * expiries count from its birth (see first_expiry). Either is settled
 * from the thread's CPU clock when it goes away (see "settlement").
 * reg_lock held. */
static void arm_thread(int tid, int fresh)
{
    struct reg_entry *e = reg_get(tid);
    if (!e) {
        reg_full++;
        return;
    }
    if (armed(e)) {
        if (!fresh)
            return;
        disarm(e);
    }
    reg_fresh(e);
    if (cpu_sampler == CPU_SAMPLER_PERF) {
        /* The event overflows a whole period from now (cpu_perf.c says
         * why never sooner); the settlement counts from a first expiry
         * drawn as a timer's would be, at or before that overflow, so
         * every overflow stands for one of its expiries and the periods
         * none stood for are its own to settle. */
        int64_t now = thread_cpu_ns(tid), first_at = 0;
        if (now > 0)
            first_expiry(now, fresh, &first_at);
        int fd = cpu_perf_open(tid, &e->perf_fd);
        if (fd >= 0)
            e->first_at = first_at;
        if (fd >= 0 || fd == -ESRCH)
            return;
    }
    int id = timer_start(tid, fresh, &e->first_at);
    if (id >= 0) {
        e->timer = id;
        cpu_sampler_count_timer();
    } else {
        e->first_at = 0;
        if (id != -EINVAL) /* EINVAL: the thread is already gone */
            timer_failures++;
    }
}

/* 1 with reg_lock held when a profile runs (checked again under the
 * lock: it may have ended meanwhile); 0, with the lock free, when none
 * does. The thread hooks below start with it. */
static int lock_if_active(void)
{
    if (!__atomic_load_n(&cpu_active, __ATOMIC_SEQ_CST))
        return 0;
    spin_lock(&reg_lock);
    if (__atomic_load_n(&cpu_active, __ATOMIC_RELAXED))
        return 1;
    spin_unlock(&reg_lock);
    return 0;
}

/* lock_if_active, with the calling thread's id and registry entry (NULL
 * when it has none). */
static int lock_mine(int *tid, struct reg_entry **e)
{
    if (!lock_if_active())
        return 0;
    *tid = (int)my_tid();
    *e = reg_find(*tid);
    return 1;
}

void cpu_thread_started(void)
{
    if (!lock_if_active())
        return;
    /* A new thread keeps the mask it inherited from its creator (the host
     * may have blocked every signal on purpose): blocked, no timer. Only
     * this thread changes its mask, so the look stays true until its own
     * next change, which the mask interposers see. */
    if (!sigmask_self_blocks(cpu_signo)) {
        arm_thread((int)my_tid(), 1);
        struct reg_entry *e = reg_find((int)my_tid());
        if (e)
            real_prctl(PR_GET_NAME, e->name);
    }
    spin_unlock(&reg_lock);
}

/* Disarms timer id and returns what was left of its period (ns), 0 when
 * it was not armed. */
static int64_t timer_pause(int id)
{
    struct itimerspec zero, old;
    memset(&zero, 0, sizeof zero);
    if (real_syscall(SYS_timer_settime, id, 0, &zero, &old) != 0)
        return 0;
    return (int64_t)old.it_value.tv_sec * 1000000000LL + old.it_value.tv_nsec;
}

static int64_t self_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * Pause and resume keep the period's phase on the thread's open clock (its
 * CPU time with the signal unblocked), and the expiries the kernel never
 * delivered. The kernel notices a CPU timer's expiry only at its tick
 * (every 1-4 ms) and only while the thread runs: a thread that unblocks the
 * signal for less than that lets expiries pass unnoticed, and disarming the
 * timer then drops them (the kernel moves a late periodic timer on to its
 * next expiry and reports only that). So the open clock counts the periods
 * due against the periods the thread's signals stood for
 * (cpu_periods_taken): at the resume, an expiry owed is armed 1 ns ahead
 * and any further ones are added to its weight (cpu_periods_owed); else
 * the timer is armed for the rest of the period.
 *
 * Both run on the thread itself, from the mask interposers, with every
 * signal blocked and reg_lock held.
 */
void cpu_thread_pause(void)
{
    int tid;
    struct reg_entry *e;
    if (!lock_mine(&tid, &e))
        return;
    if (e && e->perf_fd >= 0) {
        /* The event's count stops, and its period's phase with it; the
         * stretch until the resume is left out of the handler's account
         * (cpu_signal.c's perf_weight). */
        cpu_perf_pause(e->perf_fd);
        e->paused = 1;
        e->first_at = 0; /* not settled: its clock runs on, its count not */
        if (cpu_perf_self.gen == cpu_profile_gen && cpu_perf_self.by_clock &&
            cpu_perf_self.paused_at < 0)
            cpu_perf_self.paused_at = self_cpu_ns();
    } else if (e && e->timer >= 0) {
        int64_t left = timer_pause(e->timer);
        e->paused = 1;
        if (e->tracked) {
            e->open_now = self_cpu_ns() - e->open_off;
        } else if (left > 0) {
            /* Armed by the profile's start: the open clock begins here. */
            e->tracked = 1;
            e->first_at = 0; /* its phase now follows the open clock */
            e->open_now = 0;
            e->due = left;
            e->taken = cpu_periods_taken;
            cpu_periods_owed = 0;
        }
    }
    spin_unlock(&reg_lock);
}

void cpu_thread_resume(void)
{
    int tid;
    struct reg_entry *e;
    if (!lock_mine(&tid, &e))
        return;
    if (e && armed(e) && !e->paused) {
        /* Blocked where no interposer saw (a signal handler's mask): its
         * sampler ran on, phase and settlement kept. */
    } else if (e && e->perf_fd >= 0) {
        e->paused = 0;
        if (cpu_perf_self.gen == cpu_profile_gen &&
            cpu_perf_self.paused_at >= 0) {
            cpu_perf_self.anchor += self_cpu_ns() - cpu_perf_self.paused_at;
            cpu_perf_self.paused_at = -1;
        }
        cpu_perf_resume(e->perf_fd);
    } else if (e && e->timer >= 0 && e->tracked) {
        e->paused = 0;
        int64_t period = cpu_period_ns;
        int64_t next = e->due +
                       (int64_t)(cpu_periods_taken - e->taken) * period;
        int64_t first = next - e->open_now;
        if (first <= 0) {
            int64_t more = -first / period;
            cpu_periods_owed = (uint32_t)(more < 1000 ? more : 1000);
            first = 1;
        }
        e->open_off = self_cpu_ns() - e->open_now;
        thread_timer_set(e->timer, first, period);
    } else if (e && e->timer >= 0) {
        e->paused = 0;
        timer_arm(e->timer);
        e->first_at = 0;
    } else {
        arm_thread(tid, 0);
    }
    spin_unlock(&reg_lock);
}

/* A look at the thread's mask from outside (arm_existing_thread, under
 * sigmask_lock) reads every signal blocked while the thread is in the
 * mask interposer's own window (it blocks every signal, then waits for
 * that lock): the thread was left without a sampler until a rescan found
 * it open, a second later or more (a thread changing its mask thousands
 * of times a second lost a third of a 3 s profile, 1 run in 30). The
 * change that window belongs to ends here, with its true mask open. */
void cpu_thread_open(void)
{
    int tid;
    struct reg_entry *e;
    if (!lock_mine(&tid, &e))
        return;
    if ((!e || !armed(e)) && !is_agent_tid(tid)) {
        arm_thread(tid, 0);
        e = reg_find(tid);
        if (e && armed(e) && !e->name[0])
            real_prctl(PR_GET_NAME, e->name);
    }
    spin_unlock(&reg_lock);
}

void cpu_thread_exiting(uintptr_t start_fn)
{
    int tid;
    struct reg_entry *e;
    if (!lock_mine(&tid, &e))
        return;
    if (e) {
        int had = armed(e);
        disarm(e);
        e->exited = 1;
        if (had) {
            /* After the delete or close: no expiry or overflow of its is
             * noticed past this. */
            e->end_cpu = self_cpu_ns();
            e->start_fn = start_fn;
        }
        real_prctl(PR_GET_NAME, e->name);
    }
    spin_unlock(&reg_lock);
}

/* ---- settlement ---------------------------------------------------------- */

/*
 * The kernel notices a thread CPU timer's expiry only at a scheduler tick
 * (every 4 ms at 250 Hz) that finds the thread running; the signal then
 * carries every period passed since (its overrun). A thread that works in
 * stretches shorter than a tick is found running by few ticks, and the CPU
 * it used since the last one it met is still unnoticed when its timer goes
 * away: when it ends (a thread that lives less than a tick is almost never
 * sampled at all) or when the profile ends (about a tick's worth per busy
 * thread: 10-15% of a 5 s profile of a JVM's request threads). The timer's
 * expiries are at known points of the thread's CPU clock (first_at, then
 * every period), so when the timer goes away the periods its clock went
 * through and no sample stood for are known exactly: they are settled as
 * one sample of that weight under the thread, with a pseudo frame for a
 * leaf (where the CPU went is not known) above the start routine of a
 * thread that ended. Threads whose timer was paused (they blocked the
 * signal meanwhile) are not settled.
 *
 * A thread sampled by a perf event (cpu_perf.c) is settled the same way,
 * its first overflow placed at first_at as a timer's first expiry would
 * be. Its overflows come mid-slice, tick or not, but the task clock the
 * event counts is not quite the CPU clock (it stops and starts at the
 * perf hooks of each context switch, not where the scheduler's clock
 * does): a JVM's HTTP dispatcher, which sleeps and wakes thousands of
 * times a second, had 87% and 91% of its clock's CPU in two profiles
 * without settlement (jvm_cpu_truth); a user-time-only event also leaves
 * out the kernel time after its last overflow. The settlement brings
 * the count to the clock's. An event paused (the thread blocked the
 * signal) is not settled, as a timer.
 *
 * seen: periods of the samples drained, counted on the way (the drain and
 * the stop, on the slot holder). A thread's settlement waits for the drain
 * after the one that found it ended: a sample of its still behind a slot
 * being written is drained by then. reg_lock held around each entry.
 */
struct counting {
    cpu_sample_fn fn;
    void *arg;
};

static void count_sample(const struct cpu_sample *s, void *p)
{
    const struct counting *c = p;
    spin_lock(&reg_lock);
    struct reg_entry *e = reg_find((int)s->tid);
    if (e)
        e->seen += s->weight;
    spin_unlock(&reg_lock);
    if (c->fn)
        c->fn(s, c->arg);
}

#define SETTLE_NOT_YET 0
#define SETTLE_NEXT 1 /* ended: settled at the next drain */
#define SETTLE_DONE 2

/* The periods e's clock went through that no sample stood for, into s;
 * 0 when none. With `now`, every entry whose timer is gone; otherwise
 * only those ended before the last drain. reg_lock held. */
static uint32_t settle_entry(struct reg_entry *e, int now,
                             struct cpu_sample *s)
{
    if (!e->tid || e->settled == SETTLE_DONE || !e->first_at ||
        !e->end_cpu || armed(e))
        return 0;
    if (!now && e->settled == SETTLE_NOT_YET) {
        e->settled = SETTLE_NEXT;
        return 0;
    }
    e->settled = SETTLE_DONE;
    if (e->end_cpu < e->first_at)
        return 0;
    uint64_t due = 1 + (uint64_t)((e->end_cpu - e->first_at) / cpu_period_ns);
    if (due <= e->seen)
        return 0;
    uint64_t owed = due - e->seen;
    s->tid = (uint32_t)e->tid;
    s->weight = (uint32_t)(owed < 100000 ? owed : 100000);
    s->labels = 0;
    s->ns = agent_mono_ns();
    s->depth = 0;
    s->pcs[s->depth++] = FRAME_UNSAMPLED;
    if (e->start_fn)
        s->pcs[s->depth++] = e->start_fn;
    return s->weight;
}

/* Settles what can be (see settle_entry) into fn and the guest. */
static void settle(cpu_sample_fn fn, void *arg, int now)
{
    struct cpu_sample s;
    for (size_t i = 0; i < REG_SLOTS; i++) {
        spin_lock(&reg_lock);
        uint32_t w = settle_entry(&reg[i], now, &s);
        spin_unlock(&reg_lock);
        if (w) {
            __atomic_fetch_add(&cpu_counters.settled, w, __ATOMIC_RELAXED);
            cpu_share_emit(fn, arg, &s);
        }
    }
}

static void drain_counting(cpu_sample_fn fn, void *arg)
{
    struct counting c = {fn, arg};
    cpu_share_drain(count_sample, &c);
}

/* ---- fork ---------------------------------------------------------------- */

FORK_PATH void cpu_timer_fork_prepare(void)
{
    if (__atomic_load_n(&cpu_active, __ATOMIC_SEQ_CST))
        signals_fork_block(cpu_signo);
}

FORK_PATH void cpu_timer_fork_parent(void)
{
    signals_fork_restore();
}

static struct sigaction saved_action;
static int handler_installed;

FORK_PATH void cpu_timer_fork_child(void)
{
    /* The child has no timers (they are not inherited) and none of the
     * agent's threads: its profile state is reset, the host's signal
     * disposition restored. */
    if (__atomic_load_n(&cpu_active, __ATOMIC_RELAXED)) {
        __atomic_store_n(&cpu_active, 0, __ATOMIC_SEQ_CST);
        signals_fork_child_reset(cpu_signo, &handler_installed,
                                 &saved_action, &slot_taken);
        reg_lock.locked = 0;
        /* The parent's threads and timer ids mean nothing here, and a
         * timer the child creates may get one of those ids. The parent's
         * perf events are the child's descriptors too: closed here. */
        if (reg) {
            for (size_t i = 0; i < REG_SLOTS; i++)
                if (reg[i].tid)
                    cpu_perf_fork_child(&reg[i].perf_fd);
            memset(reg, 0, REG_SLOTS * sizeof *reg);
        }
    }
    cpu_share_fork_child();
    cpu_timer_fork_parent();
}

void cpu_timer_init(void)
{
    rand_state = (uint64_t)agent_now_ns() ^ ((uint64_t)getpid() << 32);
    cpu_signal_init();
}

/* ---- session ------------------------------------------------------------- */

static int unseen_told(int n, int sig);

/* Whether the running (or last) profile's signal is chained in front of
 * a handler of the host's (signals.h). */
static int chained;

/* SIGPROF unless the host handles it itself; then a real-time signal the
 * host leaves at its default, from the top; then one whose handler the
 * handler can chain in front of (a Go program handles SIGPROF and every
 * real-time signal). A chained SIGPROF is never chosen: the host's
 * profiler's signals and the agent's would merge while pending (a
 * standard signal is queued once), and each would lose samples; a
 * real-time signal queues every delivery. Installs the handler. Returns
 * the signal or -EAGAIN. */
static int install(void)
{
    return signals_borrow(SIGRTMAX - 1, SIGRTMIN + 4, SIGPROF,
                          cpu_signal_handler, NULL, &saved_action, &chained);
}

struct arm_pass {
    int only_unarmed;
    int skipped;
};

static int arm_existing_thread(void *arg, int tid, int dir_fd)
{
    (void)dir_fd;
    struct arm_pass *pass = arg;
    if (is_agent_tid(tid))
        return 0;
    if (pass->only_unarmed) {
        spin_lock(&reg_lock);
        struct reg_entry *e = reg_find(tid);
        int has = e && armed(e);
        spin_unlock(&reg_lock);
        if (has)
            return 0;
    }
    /* Its name now, in case it exits without passing our exit hook
     * (threads that started before the agent). */
    char name[16];
    cpu_thread_name(tid, name, sizeof name);
    /* Its mask, then its timer, with its own mask changes held off. */
    spin_lock(&sigmask_lock);
    int blocked = sigmask_thread_blocks(tid, cpu_signo) != 0;
    spin_lock(&reg_lock);
    if (!blocked)
        arm_thread(tid, 0);
    struct reg_entry *e = blocked ? NULL : reg_find(tid);
    if (e && !e->name[0])
        memcpy(e->name, name, sizeof name);
    spin_unlock(&reg_lock);
    spin_unlock(&sigmask_lock);
    pass->skipped += blocked;
    return 0;
}

/* Arms every host thread that leaves the signal unblocked; returns how
 * many were skipped because they block it. With only_unarmed, threads
 * that already have a timer are passed over without a look at their mask:
 * the rescan of a running profile (see cpu_profile_drain). */
static int arm_existing_threads(int only_unarmed)
{
    struct arm_pass pass = {.only_unarmed = only_unarmed};
    proc_list("/proc/self/task", arm_existing_thread, &pass);
    __atomic_store_n(&unseen, pass.skipped, __ATOMIC_RELAXED);
    return pass.skipped;
}

int cpu_profile_start(int hz)
{
    if (session_take(&slot_taken) != 0)
        return -EBUSY;
    if (!reg) {
        reg = arena_alloc(REG_SLOTS * sizeof *reg);
        if (!reg) {
            slot_taken = 0;
            return -ENOMEM;
        }
    }
    int err = cpu_ringbuf_reset();
    if (err) {
        slot_taken = 0;
        return err;
    }
    memset(&cpu_counters, 0, sizeof cpu_counters);
    phdr_cache_refresh(1);
    cfi_tables_refresh();
    /* Goroutine stacks walked too, in a Go program: looked for on an agent
     * thread only, never in the constructor (PPROF_DUMP_DIR's whole-run
     * profile), which reads no file; its first drain does. */
    if (agent_tls.agent_thread)
        stack_go_find();

    cpu_period_ns = 1000000000LL / (hz > 0 ? hz : 100);
    /* No timer or event exists yet: nothing of ours arrives before
     * cpu_signo is set below. */
    int sig = install();
    if (sig < 0) {
        slot_taken = 0;
        return sig;
    }
    cpu_signo = sig;
    handler_installed = 1;
    /* The sampler, once the signal is known: perf events only on a
     * SIGPROF of the agent's own, never on a chained signal (install()
     * never chains SIGPROF; cpu_perf.c takes the timer on any other), so
     * a host's handler never receives an event's overflow. */
    __atomic_add_fetch(&cpu_profile_gen, 1, __ATOMIC_RELAXED);
    cpu_sampler_choose();
    if (chained)
        log_msg(unseen_told(-1, sig) ? LOG_DEBUG : LOG_INFO,
                "cpu profile: signal %d chained in front of the program's "
                "handler (SIGPROF and every real-time signal are the "
                "program's)",
                sig);
    reg_full = 0;
    timer_failures = 0;

    /* Mask changes watched first (sigmask.c), then active, then the
     * enumeration: a thread starting meanwhile arms itself in its start
     * hook, and the registry resolves the race. */
    sigmask_watch_begin();
    __atomic_store_n(&cpu_active, 1, __ATOMIC_SEQ_CST);
    /* A thread seen blocking the signal may only be passing through a
     * window of the C library's own (pthread_create blocks every signal
     * around clone, with raw system calls the mask interposers never
     * see): a second look 20 ms later, then one at every drain. */
    if (arm_existing_threads(0) > 0) {
        struct timespec pause = {0, 20 * 1000 * 1000};
        real_nanosleep(&pause, NULL);
        arm_existing_threads(1);
    }
    log_debug("cpu profile: sampler %s", cpu_sampler_why());
    if (timer_failures || reg_full)
        log_info("cpu profile: %ld threads without a timer (%ld failed, "
                 "%ld over the registry)",
                 timer_failures + reg_full, timer_failures, reg_full);
    return 0;
}

void cpu_profile_drain(void (*fn)(const struct cpu_sample *s, void *arg),
                       void *arg)
{
    drain_counting(fn, arg);
    settle(fn, arg, 0);
    /* Threads that blocked the signal when last looked at, and have
     * unblocked it through no interposed call since. */
    if (__atomic_load_n(&cpu_active, __ATOMIC_SEQ_CST))
        arm_existing_threads(1);
    /* Objects loaded since the last drain: the unwinder learns about them
     * here (dlopen is not interposed), the symbolizer from the objects
     * generation the refresh bumps. */
    phdr_cache_refresh(0);
    cfi_tables_refresh();
    stack_go_find();
}

/* Whether (n, sig) was told before; remembers it when not. Past TOLD_MAX
 * situations, every new one counts as told (debug only). */
static int unseen_told(int n, int sig)
{
    for (int i = 0; i < ntold; i++)
        if (told[i].n == n && told[i].sig == sig)
            return 1;
    if (ntold == TOLD_MAX)
        return 1;
    told[ntold].n = n;
    told[ntold].sig = sig;
    ntold++;
    return 0;
}

void cpu_profile_stop(void (*fn)(const struct cpu_sample *s, void *arg),
                      void *arg)
{
    spin_lock(&reg_lock);
    __atomic_store_n(&cpu_active, 0, __ATOMIC_SEQ_CST);
    for (size_t i = 0; i < REG_SLOTS; i++) {
        if (reg[i].tid && armed(&reg[i])) {
            disarm(&reg[i]);
            /* Its clock when no expiry or overflow of its can be
             * noticed any more. */
            if (reg[i].first_at)
                reg[i].end_cpu = thread_cpu_ns(reg[i].tid);
        }
    }
    spin_unlock(&reg_lock);
    sigmask_watch_end();

    int n = cpu_profile_unseen();
    if (n > 0)
        log_msg(unseen_told(n, cpu_signo) ? LOG_DEBUG : LOG_INFO,
                "cpu profile: %d threads block signal %d: their CPU is not "
                "in the profile",
                n, cpu_signo);
    if (handler_installed)
        signals_give_back(cpu_signo, cpu_signal_handler, &saved_action);
    handler_installed = 0;
    /* A handler still running on another thread finishes its sample. */
    while (__atomic_load_n(&cpu_phdr_readers, __ATOMIC_SEQ_CST) != 0)
        sched_yield();
    drain_counting(fn, arg);
    settle(fn, arg, 1);
    cpu_share_end();
}

int cpu_profile_unseen(void)
{
    return __atomic_load_n(&unseen, __ATOMIC_RELAXED);
}

void cpu_thread_name(int tid, char *out, size_t size)
{
    if (size == 0)
        return;
    out[0] = '\0';
    struct reg_entry *e = reg ? reg_find((int)tid) : NULL;
    if ((!e || !e->exited) && proc_thread_name(tid, out, size) > 0)
        return;
    if (e && e->name[0]) {
        size_t n = strnlen(e->name, sizeof e->name);
        if (n >= size)
            n = size - 1;
        memcpy(out, e->name, n);
        out[n] = '\0';
    }
}

void cpu_profile_release(void)
{
    if (reg) {
        spin_lock(&reg_lock);
        memset(reg, 0, REG_SLOTS * sizeof *reg);
        spin_unlock(&reg_lock);
    }
    __atomic_store_n(&slot_taken, 0, __ATOMIC_SEQ_CST);
}
