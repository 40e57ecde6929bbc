/*
 * The peak heap profile: a copy of the heap buckets' counters taken near
 * the high-water mark of the in-use estimate (heap_inuse_estimate()), kept
 * without ever stopping the host. agent/heap.h has the contract and
 * docs/memory.md the cost and accuracy.
 *
 * Host threads enter only heap_peak_note(), after a sample, with the guard
 * entered: it keeps the exact high-water mark (a compare, and a CAS on a
 * new maximum) and, when the estimate passes heap_peak_trigger, sets a
 * flag and wakes the peak thread with one futex call. The peak thread (one
 * of the agent's own, started by the server) takes the copy, at most once
 * per HEAP_PEAK_MIN_INTERVAL_MS, and keeps it when its estimate is the
 * largest of the period. HTTP workers read the kept copy under peak_lock.
 * Never entered from a signal handler.
 */
#include "agent/heap.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int64_t heap_peak_trigger = INT64_MAX; /* nothing asks until the thread runs */

/* Exact high-water mark of the estimate since the period began. */
static int64_t high_water;
/* 1 when a host thread asked for a copy and the thread has not taken it. */
static int wanted;
/* The pid the peak thread runs in (0: not started); a forked child has
 * none until heap_peak_start() runs in it. */
static pid_t running_in;

/* The kept copy and its figures, under peak_lock (the peak thread and
 * HTTP workers only). */
static spinlock_t peak_lock;
static struct stack_snapshot kept;
static struct heap_peak_info kept_info;

void heap_peak_note(int64_t inuse)
{
    int64_t hw = __atomic_load_n(&high_water, __ATOMIC_RELAXED);
    while (inuse > hw &&
           !__atomic_compare_exchange_n(&high_water, &hw, inuse, 1,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    if (likely(inuse <= __atomic_load_n(&heap_peak_trigger, __ATOMIC_RELAXED)))
        return;
    if (__atomic_exchange_n(&wanted, 1, __ATOMIC_ACQ_REL) == 0)
        syscall(SYS_futex, &wanted, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The in-use estimate of a copy of the buckets, as the profile shows it. */
static int64_t snapshot_inuse(const struct stack_snapshot *s)
{
    int64_t total = 0;
    for (size_t i = 0; i < s->n; i++) {
        const int64_t *v = &s->values[i * (size_t)s->nvalues];
        int64_t inuse = v[HEAP_ALLOC_OBJECTS] - v[HEAP_FREE_OBJECTS];
        if (inuse > 0)
            total += inuse * (int64_t)heap_table_weight(
                                 (uint64_t)heap_key_size(s->entries[i]->key));
    }
    return total;
}

static void set_trigger(int64_t kept_bytes)
{
    int64_t t = kept_bytes + (kept_bytes >> HEAP_PEAK_MARGIN_SHIFT);
    /* At least a few samples' worth above, so one sample cannot ask. */
    int64_t floor_ = kept_bytes + 4 * (opt_heap_rate > 1 ? opt_heap_rate : 1);
    __atomic_store_n(&heap_peak_trigger, t > floor_ ? t : floor_,
                     __ATOMIC_RELAXED);
}

/* Takes one copy and keeps it if it is the period's largest. */
static void take_copy(void)
{
    struct stack_snapshot s;
    int64_t t0 = mono_ns();
    if (stack_table_snapshot(heap_buckets, &s) != 0)
        return;
    int64_t bytes = snapshot_inuse(&s);
    int64_t cost = mono_ns() - t0;
    spin_lock(&peak_lock);
    kept_info.copies++;
    kept_info.copy_cost_ns = cost;
    if (bytes >= kept_info.copy_bytes || !kept.entries) {
        struct stack_snapshot old = kept;
        kept = s;
        s = old;
        kept_info.copy_bytes = bytes;
        kept_info.copy_time_ns = agent_now_ns();
    }
    set_trigger(kept_info.copy_bytes);
    spin_unlock(&peak_lock);
    if (s.entries)
        stack_snapshot_free(&s);
}

static void *peak_thread(void *unused)
{
    (void)unused;
    int64_t last = 0;
    for (;;) {
        if (!__atomic_load_n(&wanted, __ATOMIC_ACQUIRE)) {
            syscall(SYS_futex, &wanted, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
            continue;
        }
        int64_t wait = last + HEAP_PEAK_MIN_INTERVAL_MS * 1000000LL - mono_ns();
        if (wait > 0) {
            struct timespec ts = {0, (long)wait};
            nanosleep(&ts, NULL);
        }
        /* Cleared before the copy: a new high during it asks again. */
        __atomic_store_n(&wanted, 0, __ATOMIC_RELEASE);
        take_copy();
        last = mono_ns();
    }
    return NULL;
}

void heap_peak_start(void)
{
    if (__atomic_load_n(&heap_enabled, __ATOMIC_ACQUIRE) <= 0 || !heap_buckets)
        return;
    pid_t self = getpid();
    if (__atomic_load_n(&running_in, __ATOMIC_ACQUIRE) == self)
        return;
    /* In a forked child, the parent's thread is gone; its flag may be set
     * with no one to clear it. */
    __atomic_store_n(&wanted, 0, __ATOMIC_RELAXED);
    spin_lock(&peak_lock);
    if (kept_info.since_ns == 0)
        kept_info.since_ns = agent_now_ns();
    set_trigger(kept_info.copy_bytes);
    spin_unlock(&peak_lock);

    /* One of the agent's threads (the guard makes the pthread_create
     * interposer mark it so), taking no host signal. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    guard_enter();
    pthread_t t;
    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (err == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        err = pthread_create(&t, &attr, peak_thread, NULL);
        pthread_attr_destroy(&attr);
    }
    guard_leave();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        log_info("peak heap profile off: cannot start its thread (%s)",
                 strerror(err));
        __atomic_store_n(&heap_peak_trigger, INT64_MAX, __ATOMIC_RELAXED);
        return;
    }
    __atomic_store_n(&running_in, self, __ATOMIC_RELEASE);
}

static int copy_snapshot(const struct stack_snapshot *from,
                         struct stack_snapshot *to)
{
    memset(to, 0, sizeof *to);
    to->nvalues = from->nvalues ? from->nvalues : HEAP_NVALUES;
    if (!from->n)
        return 0;
    to->entries = malloc(from->n * sizeof *to->entries);
    to->values = malloc(from->n * (size_t)to->nvalues * sizeof *to->values);
    if (!to->entries || !to->values) {
        free(to->entries);
        free(to->values);
        memset(to, 0, sizeof *to);
        return -ENOMEM;
    }
    memcpy(to->entries, from->entries, from->n * sizeof *to->entries);
    memcpy(to->values, from->values,
           from->n * (size_t)to->nvalues * sizeof *to->values);
    to->n = from->n;
    return 0;
}

int heap_peak_get(struct stack_snapshot *out, struct heap_peak_info *info,
                  int reset)
{
    /* Copied out under the lock with malloc: the peak thread and HTTP
     * workers are the only users, and neither holds a host lock. */
    spin_lock(&peak_lock);
    int err = copy_snapshot(&kept, out);
    *info = kept_info;
    info->high_water_bytes = __atomic_load_n(&high_water, __ATOMIC_RELAXED);
    struct stack_snapshot old = {0};
    if (err == 0 && reset) {
        old = kept;
        memset(&kept, 0, sizeof kept);
        int64_t now = heap_inuse_estimate();
        memset(&kept_info, 0, sizeof kept_info);
        kept_info.since_ns = agent_now_ns();
        __atomic_store_n(&high_water, now, __ATOMIC_RELAXED);
        set_trigger(now);
    }
    spin_unlock(&peak_lock);
    if (reset) {
        /* The new period starts with a copy of what is in use now. */
        __atomic_store_n(&wanted, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &wanted, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
    if (old.entries)
        stack_snapshot_free(&old);
    return err;
}
