/*
 * The contention recorder: Go's sampling rules for the block and mutex
 * profiles, and the per-lock records that let an unlocker be charged the
 * delay its waiters suffered.
 *
 * Entered only from the lock interposers (agent/locks/lock_hooks.c,
 * agent/locks/wait_hooks.c) and the futex interposer (agent/locks/futex_hooks.c) on host
 * threads, and only on the contended path: a lock whose try-lock failed, a
 * wait on a condition variable, semaphore or futex, an unlock or futex wake
 * while somebody somewhere waits. It never blocks on anything the host can hold (the lock
 * records use the agent's spinlocks, held for a few instructions), never
 * allocates through the host's allocator except inside stack capture with
 * the guard entered, and never captures a stack while the host's lock is
 * held by the charged unlocker.
 *
 * Holder attribution. Each contended lock gets a small record, found by
 * hashing its address, created when its first waiter arrives:
 *     pending += waiters * (now - last); last = now
 * is integrated whenever a waiter arrives or leaves and when the lock is
 * unlocked; the unlocker takes `pending` (and zeroes it). The sum of all
 * charges is the sum of all waits, each part charged to whoever held the
 * lock during it, which is what Go 1.19's semrelease charges (the waited
 * time of every waiter on the address, since its last charge).
 *
 * Sampling, as Go 1.19's runtime (pprof-format.md 3.3):
 *   block: a wait of w >= rate ns is recorded as (count 1, delay w); a
 *     shorter one with probability w/rate, as (count rate/w, delay rate).
 *   mutex: one waiter in `fraction` is followed; the charges of its delay
 *     are recorded by the same rule with a fixed quantum
 *     (contention_charge_sample()); the endpoint multiplies by the
 *     fraction.
 */
#include "agent/locks/contention.h"

#include "agent/core/arena.h"
#include "agent/config.h"
#include "agent/guard.h"
#include "agent/core/hash.h"
#include "agent/log.h"
#include "agent/spinlock.h"
#include "agent/stacks/stack.h"
#include "agent/stacks/stack_table.h"

#include <sys/single_threaded.h>
#include <time.h>

/* Weak, as in lock_hooks.c: musl's loader has no such name. */
#pragma weak __libc_single_threaded

struct stack_table *block_table;
struct stack_table *mutex_table;
int contention_on;
long contention_waiters __attribute__((aligned(64)));
long contention_futex_waiters __attribute__((aligned(64)));
long contention_lost;
int contention_hint[1 << CONTENTION_HINT_BITS] __attribute__((aligned(64)));

/* Per-lock records: open addressing over a fixed array (arena), at most
 * PROBES slots from the hash. A record whose lock has no waiter can be
 * taken over by another lock; its leftover pending (wake-up latency) is
 * dropped. Fields are guarded by the record's spinlock; `addr` is also
 * read without it to skip foreign slots, and rechecked under it. */
#define RECORDS 4096
#define PROBES 16

struct lock_record {
    spinlock_t lock;
    int waiters;
    const void *addr;
    int64_t last;
    int64_t pending;    /* delay since the last hand-over or charge */
    int64_t owed;       /* delay up to the last hand-over, not yet charged */
    int64_t owed_count; /* waiters concerned by owed */
    uint64_t owed_until; /* contention_stamp() of the last hand-over */
} __attribute__((aligned(64)));

static struct lock_record *records;
/* Serializes the creation of records, so one lock never gets two. */
static spinlock_t claim_lock;

/* Per-thread random state for Go's sampling decisions. */
static __thread uint64_t rng_state;

static uint64_t rng_next(void)
{
    if (rng_state == 0)
        rng_state = rand_seed((uint64_t)contention_clock() ^
                              (uint64_t)(uintptr_t)&rng_state);
    return rand_next(&rng_state);
}

int64_t contention_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void contention_init(void)
{
    if (opt_block_rate > 0)
        block_table = stack_table_create(CONTENTION_VALUES, 4096);
    if (opt_mutex_fraction > 0) {
        mutex_table = stack_table_create(CONTENTION_VALUES, 4096);
        records = arena_alloc(RECORDS * sizeof *records);
    }
    int on = 0;
    if (block_table || records)
        on = __libc_single_threaded ? CONTENTION_ON_SINGLE : CONTENTION_ON;
    __atomic_store_n(&contention_on, on, __ATOMIC_RELEASE);
}

static size_t record_hash(const void *lock)
{
    return (size_t)hash_murmur_half((uint64_t)(uintptr_t)lock);
}

/* Integrates the waiters' delay up to now. Record lock held. */
static void integrate(struct lock_record *r, int64_t now)
{
    if (now > r->last) {
        r->pending += (int64_t)r->waiters * (now - r->last);
        r->last = now;
    }
}

/* The record of lock with its spinlock held, or NULL. A never-used slot
 * ends the search: a record is created in the first never-used slot of its
 * probe sequence, or in a used one before any never-used one, and a slot
 * never becomes unused again. So a lock without a record costs one probe
 * while the table is sparse (a futex wake while a waiter is followed
 * elsewhere: 16 probes cost 300 instructions per wake). */
static struct lock_record *find_locked(const void *lock)
{
    size_t h = record_hash(lock);
    for (size_t i = 0; i < PROBES; i++) {
        struct lock_record *r = &records[(h + i) & (RECORDS - 1)];
        const void *a = __atomic_load_n(&r->addr, __ATOMIC_RELAXED);
        if (a == NULL)
            return NULL;
        if (a != lock)
            continue;
        spin_lock(&r->lock);
        if (r->addr == lock)
            return r;
        spin_unlock(&r->lock);
    }
    return NULL;
}

/* A sampled waiter arrives at lock; waiters is the counter that the
 * unlockers (or wakers) of its kind read before doing any work. */
static void *arrive_locked(const void *lock, int64_t now, long *waiters)
{
    if (!records)
        return NULL;
    /* Go records 1 in fraction mutex events; here the waiters are sampled
     * when they arrive, so that the others cost no bookkeeping at all (the
     * bookkeeping of every waiter cost 10% of the contended benchmark).
     * The proto multiplies what the sampled waiters suffered by the
     * fraction, which keeps the totals unbiased. */
    long fraction = opt_mutex_fraction;
    if (fraction <= 0 ||
        (fraction > 1 && rng_next() % (uint64_t)fraction != 0))
        return NULL;
    struct lock_record *r = find_locked(lock);
    if (!r) {
        spin_lock(&claim_lock);
        r = find_locked(lock);
        if (!r) {
            /* Prefer a never-used slot, then one whose lock is idle. */
            size_t h = record_hash(lock);
            struct lock_record *idle = NULL;
            for (size_t i = 0; i < PROBES && !r; i++) {
                struct lock_record *c = &records[(h + i) & (RECORDS - 1)];
                spin_lock(&c->lock);
                if (c->addr == NULL) {
                    r = c;
                    break;
                }
                if (c->waiters == 0 && !idle)
                    idle = c;
                spin_unlock(&c->lock);
            }
            if (!r && idle) {
                spin_lock(&idle->lock);
                if (idle->waiters == 0)
                    r = idle;
                else
                    spin_unlock(&idle->lock);
            }
            if (r) {
                __atomic_store_n(&r->addr, lock, __ATOMIC_RELAXED);
                r->pending = 0;
                r->owed = 0;
                r->owed_count = 0;
                r->owed_until = 0;
                r->last = now;
            }
        }
        spin_unlock(&claim_lock);
        if (!r) {
            __atomic_fetch_add(&contention_lost, 1, __ATOMIC_RELAXED);
            return NULL;
        }
    }
    integrate(r, now);
    r->waiters++;
    spin_unlock(&r->lock);
    /* The slot before the global count: an unlocker that sees the count
     * then reads the slot. */
    __atomic_fetch_add(contention_hint_slot(lock), 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(waiters, 1, __ATOMIC_RELAXED);
    return r;
}

/*
 * The spinlocks below (claim_lock, a record's) are held with the guard
 * entered: a signal handler that interrupts the holder and makes a futex
 * call of its own (a legitimate thing for a handler to do) is then only
 * forwarded, instead of spinning on a lock its own thread holds.
 */
static void *arrive(const void *lock, int64_t now, long *waiters)
{
    guard_enter();
    void *h = arrive_locked(lock, now, waiters);
    guard_leave();
    return h;
}

void *contention_arrive(const void *lock, int64_t now)
{
    return arrive(lock, now, &contention_waiters);
}

void *contention_futex_arrive(const void *uaddr, int64_t now)
{
    return arrive(uaddr, now, &contention_futex_waiters);
}

static void leave(void *handle, int64_t now, long *waiters)
{
    struct lock_record *r = handle;
    if (!r)
        return;
    guard_enter();
    spin_lock(&r->lock);
    integrate(r, now);
    r->waiters--;
    /* This waiter now holds the lock, so whoever held it before has
     * unlocked: what accrued so far is owed to that holder, whose charge
     * (taken after its real unlock) may come later than this. */
    r->owed += r->pending;
    r->owed_count++;
    r->owed_until = contention_stamp();
    r->pending = 0;
    /* The record keeps its address while it has waiters: this is the
     * address the slot was counted for. */
    int *slot = contention_hint_slot(r->addr);
    spin_unlock(&r->lock);
    guard_leave();
    __atomic_fetch_sub(slot, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(waiters, 1, __ATOMIC_RELAXED);
}

void contention_leave(void *handle, int64_t now)
{
    leave(handle, now, &contention_waiters);
}

void contention_futex_leave(void *handle, int64_t now)
{
    leave(handle, now, &contention_futex_waiters);
}

void contention_handover(const void *lock)
{
    if (!records)
        return;
    guard_enter();
    struct lock_record *r = find_locked(lock);
    if (!r) {
        guard_leave();
        return;
    }
    if (r->waiters > 0) {
        /* As in contention_leave(): an unsampled waiter took the lock, so
         * its previous holder has unlocked and is owed what the sampled
         * waiters suffered until now. */
        integrate(r, contention_clock());
        r->owed += r->pending;
        r->owed_until = contention_stamp();
        r->pending = 0;
    }
    spin_unlock(&r->lock);
    guard_leave();
}

int contention_charge(const void *lock, uint64_t unlocked_at, int64_t *delay,
                      int64_t *count)
{
    *delay = 0;
    *count = 0;
    if (!records)
        return 0;
    guard_enter();
    struct lock_record *r = find_locked(lock);
    if (!r) {
        guard_leave();
        return 0;
    }
    int64_t d, c;
    if (unlocked_at <= r->owed_until) {
        /* A waiter took over after this unlock: the delay up to the
         * hand-over is this unlocker's; what accrues since is the new
         * holder's. */
        d = r->owed;
        c = r->owed_count;
        r->owed = 0;
        r->owed_count = 0;
    } else {
        /* This unlocker held the lock since the last hand-over (owed, if
         * any, waits for its own unlocker, whose charge is late). */
        integrate(r, contention_clock());
        d = r->pending;
        c = r->waiters;
        r->pending = 0;
    }
    spin_unlock(&r->lock);
    guard_leave();
    if (d <= 0 || opt_mutex_fraction <= 0)
        return 0;
    *delay = d;
    *count = c > 0 ? c : 1;
    return contention_charge_sample(delay, count);
}

/* Below this many ns a charge is recorded by chance (see below). */
#define CHARGE_QUANTUM_NS 100000

/*
 * The waiters were sampled when they arrived (one in the fraction), but a
 * followed waiter is overtaken by every unlocker that takes the lock
 * before it (glibc's mutex is not fair), and each of them is charged its
 * share: 37k-79k charges, each a stack capture, for 800k contended
 * operations at the default fraction. Go captures once per sampled event.
 * So a charge of d ns is recorded with probability d / CHARGE_QUANTUM_NS
 * when shorter, weighted by the inverse: its delay becomes the quantum and
 * its count count * quantum / d, rounded up or down at random. The
 * expected totals stay the true ones (as the block profile's rate rule),
 * and the captures are at most the followed delay / quantum plus one per
 * longer charge: proportional to the sampled waits, so to the fraction.
 * Does not allocate.
 */
int contention_charge_sample(int64_t *delay, int64_t *count)
{
    int64_t d = *delay;
    if (d >= CHARGE_QUANTUM_NS)
        return 1;
    if (d <= 0 || (int64_t)(rng_next() % CHARGE_QUANTUM_NS) >= d)
        return 0;
    int64_t scaled = *count * CHARGE_QUANTUM_NS;
    int64_t c = scaled / d;
    if ((int64_t)(rng_next() % (uint64_t)d) < scaled % d)
        c++;
    *delay = CHARGE_QUANTUM_NS;
    *count = c;
    return 1;
}

/* Adds (count, delay) to the caller's stack (and key) in t. Guard
 * entered. */
static void record(struct stack_table *t, int64_t count, int64_t delay,
                   uint64_t key)
{
    uintptr_t pcs[STACK_MAX];
    int n = stack_capture_no_alloc(pcs, STACK_MAX);
    if (n == 0) {
        pcs[0] = FRAME_UNKNOWN;
        n = 1;
    }
    struct stack_entry *e = stack_table_get(t, pcs, n, key);
    if (!e) {
        __atomic_fetch_add(&contention_lost, 1, __ATOMIC_RELAXED);
        return;
    }
    stack_entry_add(e, 0, count);
    stack_entry_add(e, 1, delay);
}

void contention_block_event(int64_t ns)
{
    int64_t rate = opt_block_rate;
    if (!block_table || rate <= 0)
        return;
    if (ns < 1)
        ns = 1;
    int64_t count, delay;
    if (ns >= rate) {
        count = CONTENTION_COUNT_SCALE;
        delay = ns;
    } else {
        /* Recorded with probability ns/rate, weighted by its inverse so
         * that the expected totals are the true ones. */
        if ((int64_t)(rng_next() % (uint64_t)rate) >= ns)
            return;
        count = rate * CONTENTION_COUNT_SCALE / ns;
        delay = rate;
    }
    guard_enter();
    record(block_table, count, delay, 0);
    guard_leave();
}

void contention_mutex_event(int64_t delay, int64_t count)
{
    contention_mutex_event_key(delay, count, CONTENTION_KEY_LOCK);
}

void contention_mutex_event_key(int64_t delay, int64_t count, uint64_t key)
{
    if (!mutex_table)
        return;
    guard_enter();
    record(mutex_table, count, delay, key);
    guard_leave();
}

char contention_unseen[400];

void contention_unseen_set(const char *why)
{
    log_snprintf(contention_unseen, sizeof contention_unseen, "%s", why);
}
