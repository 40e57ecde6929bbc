/*
 * The wall profile's session: its signal and handler, the table of host
 * threads it follows, and their CPU-time timers.
 *
 * A running thread gets a POSIX timer on its own CPU clock (the CPU
 * profile's mechanism, cpu_timer.c, with a signal and timers of its own so
 * that both profiles can run at once) that signals that thread
 * (SIGEV_THREAD_ID) every WALL_TIMER_PERIOD_NS of CPU time; the handler
 * (wall_signal.c) keeps its most recent stack in the thread's slot. The
 * session's thread (wall_look.c) arms a timer when it sees the thread
 * running and disarms it when it sees it asleep, so a thread that sleeps
 * for long has no armed timer, and a CPU clock only advances while its
 * thread runs: no thread is ever signalled while it sleeps, and nothing is
 * ever sent to a thread by anyone but its own clock.
 *
 * Signals only reach threads that leave them unblocked (agent/host/sigmask.c
 * has the protocol): a thread's mask is looked at in /proc before its
 * first arming, with mask changes held off (sigmask_lock); afterwards the
 * mask interposers tell (wall_thread_mask), disarming the timer of a
 * thread that blocks the signal, and whatever of ours is pending is
 * dequeued there (sigmask_hooks.c). A thread seen blocking it is looked at
 * again at the next arming after a second (the C library blocks every
 * signal for a moment around clone, where no interposer sees it).
 *
 * Table: entries are handed out densely (index = the slot index its timer
 * carries); an open-addressing index maps tids to them. The timer fields
 * and the index change under sigmask_lock only: by the session's thread,
 * by the mask interposers and by a thread's exit hook. The rest of an
 * entry belongs to the session's thread.
 *
 * Contexts: start/stop/get/sweep/arm on the one HTTP worker holding the
 * session; the hooks on host threads. Never in a signal handler.
 */
#include "agent/wall/wall.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/threads/blocked.h"

#include "agent/stacks/cfi.h"
#include "agent/cpu/cpu.h"
#include "agent/log.h"
#include "agent/core/own_memory.h"
#include "agent/stacks/phdr_cache.h"
#include "agent/host/proc.h"
#include "agent/host/sigmask.h"
#include "agent/stacks/stack.h"
#include "agent/host/signals.h"
#include "agent/spinlock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int wall_active;
int wall_signo;
struct wall_thread *wall_threads;
int wall_tasks_fd = -1;
uint32_t wall_exits;

static int slot_taken;
static struct sigaction saved_action;
static int handler_installed;

/* tid -> entry index + 1; 0 empty, -1 a removed entry's place. Twice the
 * table's size, so it stays at most half full. */
#define INDEX_SLOTS (2 * WALL_THREADS_MAX)
static int32_t *tid_index;
/* Entries never handed out start at `fresh`; freed ones are reused first. */
static uint32_t fresh;
static uint32_t free_list[WALL_THREADS_MAX];
static uint32_t nfree;
static long table_full;

/* When a thread seen blocking the signal may be looked at again. */
#define RECHECK_NS 1000000000LL

static pid_t my_tid(void)
{
    return (pid_t)real_syscall(SYS_gettid);
}

/* ---- the index (sigmask_lock held) --------------------------------------- */

static size_t index_home(int tid)
{
    return ((unsigned)tid * 2654435761u) & (INDEX_SLOTS - 1);
}

static struct wall_thread *find(int tid)
{
    for (size_t i = index_home(tid), k = 0; k < INDEX_SLOTS;
         i = (i + 1) & (INDEX_SLOTS - 1), k++) {
        int32_t v = tid_index[i];
        if (v == 0)
            return NULL;
        if (v > 0 && wall_threads[v - 1].tid == tid)
            return &wall_threads[v - 1];
    }
    return NULL;
}

static void index_remove(int tid)
{
    for (size_t i = index_home(tid), k = 0; k < INDEX_SLOTS;
         i = (i + 1) & (INDEX_SLOTS - 1), k++) {
        int32_t v = tid_index[i];
        if (v == 0)
            return;
        if (v > 0 && wall_threads[v - 1].tid == tid) {
            tid_index[i] = -1;
            return;
        }
    }
}

/* Rebuilds the index from the live entries: drops the removed places. */
static void index_rebuild(void)
{
    memset(tid_index, 0, INDEX_SLOTS * sizeof *tid_index);
    for (uint32_t e = 0; e < fresh; e++) {
        int tid = wall_threads[e].tid;
        if (tid <= 0)
            continue;
        size_t i = index_home(tid);
        while (tid_index[i] != 0)
            i = (i + 1) & (INDEX_SLOTS - 1);
        tid_index[i] = (int32_t)e + 1;
    }
}

/* ---- timers (sigmask_lock held) ------------------------------------------ */

/* A timer on tid's CPU clock that signals tid with its slot in si_value.
 * Returns the kernel timer id or -errno. */
static int timer_new(int tid, uint32_t slot)
{
    return thread_timer_create(tid, wall_signo,
                               wall_timer_value(slot, (uint32_t)tid));
}

static void drop_timer(struct wall_thread *t)
{
    if (t->timer >= 0)
        real_syscall(SYS_timer_delete, t->timer);
    t->timer = -1;
    t->armed = 0;
}

/* Gives entry t up: no timer, its slot free, its tid out of the index. */
static void release(struct wall_thread *t)
{
    drop_timer(t);
    uint32_t e = (uint32_t)(t - wall_threads);
    __atomic_store_n(&wall_slots[e].tid, 0, __ATOMIC_RELEASE);
    index_remove(t->tid);
    t->tid = 0;
    free_list[nfree++] = e;
}

/* ---- the table (session thread) ------------------------------------------ */

struct wall_thread *wall_thread_get(int tid)
{
    spin_lock(&sigmask_lock);
    struct wall_thread *t = find(tid);
    if (!t) {
        uint32_t e;
        if (nfree > 0)
            e = free_list[--nfree];
        else if (fresh < WALL_THREADS_MAX)
            e = fresh++;
        else {
            table_full++;
            spin_unlock(&sigmask_lock);
            return NULL;
        }
        t = &wall_threads[e];
        memset(t, 0, sizeof *t);
        t->tid = tid;
        t->timer = -1;
        t->blocks = -1;
        t->last_run_nv = ~0ULL;
        size_t i = index_home(tid);
        while (tid_index[i] > 0)
            i = (i + 1) & (INDEX_SLOTS - 1);
        tid_index[i] = (int32_t)e + 1;
    }
    spin_unlock(&sigmask_lock);
    return t;
}

static int listed(const int *tids, size_t n, int tid)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tids[mid] == tid)
            return 1;
        if (tids[mid] < tid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

void wall_threads_sweep(const int *tids, size_t n)
{
    spin_lock(&sigmask_lock);
    for (uint32_t e = 0; e < fresh; e++) {
        struct wall_thread *t = &wall_threads[e];
        if (t->tid > 0 && !listed(tids, n, t->tid))
            release(t);
    }
    index_rebuild();
    spin_unlock(&sigmask_lock);
}

int wall_thread_arm(struct wall_thread *t, int64_t now_ns)
{
    uint32_t e = (uint32_t)(t - wall_threads);
    spin_lock(&sigmask_lock);
    if (t->armed) {
        spin_unlock(&sigmask_lock);
        return 1;
    }
    if (t->blocks < 0 ||
        (t->blocks > 0 && now_ns - t->mask_checked_ns >= RECHECK_NS)) {
        int b = sigmask_thread_blocks(t->tid, wall_signo);
        t->blocks = b < 0 ? 1 : b; /* unreadable: gone, or about to be */
        t->mask_checked_ns = now_ns;
    }
    if (t->blocks) {
        spin_unlock(&sigmask_lock);
        return 0;
    }
    __atomic_store_n(&wall_slots[e].tid, (uint32_t)t->tid, __ATOMIC_RELEASE);
    t->armed_seq = __atomic_load_n(&wall_slots[e].seq, __ATOMIC_ACQUIRE) & ~1u;
    for (int attempt = 0; attempt < 2 && !t->armed; attempt++) {
        if (t->timer < 0)
            t->timer = timer_new(t->tid, e);
        if (t->timer < 0) {
            t->timer = -1;
            break; /* the thread is gone (EINVAL), or no timer to be had */
        }
        if (thread_timer_set(t->timer, WALL_TIMER_FIRST_NS,
                             WALL_TIMER_PERIOD_NS) == 0)
            t->armed = 1;
        else
            drop_timer(t); /* its thread ended (a tid used again): anew */
    }
    spin_unlock(&sigmask_lock);
    return t->armed;
}

void wall_thread_disarm(struct wall_thread *t)
{
    spin_lock(&sigmask_lock);
    if (t->armed && t->timer >= 0)
        thread_timer_set(t->timer, 0, 0);
    t->armed = 0;
    spin_unlock(&sigmask_lock);
}

/* ---- hooks (host threads) ------------------------------------------------ */

void wall_thread_mask(int blocks)
{
    if (!__atomic_load_n(&wall_active, __ATOMIC_SEQ_CST))
        return;
    struct wall_thread *t = find((int)my_tid());
    if (!t)
        return;
    t->blocks = blocks;
    if (blocks && t->armed) {
        thread_timer_set(t->timer, 0, 0);
        t->armed = 0;
    }
}

void wall_thread_exiting(void)
{
    if (!__atomic_load_n(&wall_active, __ATOMIC_SEQ_CST))
        return;
    spin_lock(&sigmask_lock);
    struct wall_thread *t =
        __atomic_load_n(&wall_active, __ATOMIC_RELAXED) ? find((int)my_tid())
                                                        : NULL;
    if (t) {
        /* Its timer dies with it; its entry is the session's to free. */
        drop_timer(t);
        __atomic_store_n(&wall_slots[t - wall_threads].tid, 0,
                         __ATOMIC_RELEASE);
        t->blocks = 1;
    }
    if (__atomic_load_n(&wall_active, __ATOMIC_RELAXED))
        __atomic_fetch_add(&wall_exits, 1, __ATOMIC_RELEASE);
    spin_unlock(&sigmask_lock);
}

/* ---- fork ---------------------------------------------------------------- */

/* A thread with a busy timer could see clone() restarted for ever on
 * kernels that signal from inside the call: the signal is blocked around
 * fork, as cpu_timer.c does for its own. */
FORK_PATH void wall_fork_prepare(void)
{
    if (__atomic_load_n(&wall_active, __ATOMIC_SEQ_CST))
        signals_fork_block(wall_signo);
}

FORK_PATH void wall_fork_parent(void)
{
    signals_fork_restore();
}

FORK_PATH void wall_fork_child(void)
{
    /* No timers and no session thread came along: the child starts with
     * no session and the host's disposition back. */
    if (__atomic_load_n(&wall_active, __ATOMIC_RELAXED)) {
        __atomic_store_n(&wall_active, 0, __ATOMIC_SEQ_CST);
        signals_fork_child_reset(wall_signo, &handler_installed,
                                 &saved_action, &slot_taken);
        nfree = 0;
        fresh = 0;
    }
    /* The parent's threads folder (/proc/self was the parent). */
    proc_tasks_close(&wall_tasks_fd);
    wall_fork_parent();
}

/* ---- the session --------------------------------------------------------- */

/* A real-time signal the host leaves at its default, else one whose
 * handler it can chain in front of (signals.h), taken from the low end
 * (the CPU profile and the threads dump take theirs from the high end).
 * Installs the handler. Returns the signal or -EAGAIN. */
static int install(void)
{
    return signals_borrow(SIGRTMIN + 4, SIGRTMAX - 4, 0, wall_signal_handler,
                          NULL, &saved_action, NULL);
}

static void *map(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    own_memory_add(p, size);
    return p;
}

int wall_session_start(void)
{
    if (session_take(&slot_taken) != 0)
        return -EBUSY;
    if (!wall_threads) {
        wall_threads = map(WALL_THREADS_MAX * sizeof *wall_threads);
        tid_index = map(INDEX_SLOTS * sizeof *tid_index);
        struct wall_slot *slots = map(WALL_THREADS_MAX * sizeof *slots);
        if (!wall_threads || !tid_index || !slots) {
            /* Partly mapped: kept for the next try. */
            if (slots)
                __atomic_store_n(&wall_slots, slots, __ATOMIC_RELEASE);
            __atomic_store_n(&slot_taken, 0, __ATOMIC_SEQ_CST);
            return -ENOMEM;
        }
        __atomic_store_n(&wall_slots, slots, __ATOMIC_RELEASE);
    }
    if (!wall_slots) {
        __atomic_store_n(&slot_taken, 0, __ATOMIC_SEQ_CST);
        return -ENOMEM;
    }
    /* Libraries loaded since the last look: the handlers unwind with
     * tables that cover them. */
    phdr_cache_refresh(0);
    cfi_tables_refresh();
    stack_go_find(); /* goroutine stacks walked too, in a Go program */
    int sig = install();
    if (sig < 0) {
        __atomic_store_n(&slot_taken, 0, __ATOMIC_SEQ_CST);
        return sig;
    }
    handler_installed = 1;
    /* The looks read their threads' files through it; by path when it
     * cannot be had. */
    if (wall_tasks_fd < 0)
        proc_tasks_open(&wall_tasks_fd);
    /* Not dumpable: the hooks note where threads block (look_noted). */
    blocked_notes_check();
    wall_exits = 0;
    memset(&wall_counters, 0, sizeof wall_counters);
    fresh = 0;
    nfree = 0;
    table_full = 0;
    memset(tid_index, 0, INDEX_SLOTS * sizeof *tid_index);
    wall_signo = sig;
    /* Mask changes watched first, then active: from here on every change
     * takes sigmask_lock and reaches wall_thread_mask(). */
    sigmask_watch_begin();
    __atomic_store_n(&wall_active, 1, __ATOMIC_SEQ_CST);
    return 0;
}

void wall_session_refresh(void)
{
    phdr_cache_refresh(0);
    cfi_tables_refresh();
}

void wall_session_stop(void)
{
    spin_lock(&sigmask_lock);
    __atomic_store_n(&wall_active, 0, __ATOMIC_SEQ_CST);
    for (uint32_t e = 0; e < fresh; e++) {
        struct wall_thread *t = &wall_threads[e];
        drop_timer(t);
        __atomic_store_n(&wall_slots[e].tid, 0, __ATOMIC_RELEASE);
        t->tid = 0;
    }
    fresh = 0;
    nfree = 0;
    spin_unlock(&sigmask_lock);
    sigmask_watch_end();
    if (handler_installed)
        signals_give_back(wall_signo, wall_signal_handler, &saved_action);
    handler_installed = 0;
    proc_tasks_close(&wall_tasks_fd);
    if (table_full)
        log_info("wall profile: %ld threads not followed (table full)",
                 table_full);
    __atomic_store_n(&slot_taken, 0, __ATOMIC_SEQ_CST);
}
