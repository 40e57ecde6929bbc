/*
 * Who waits for whom: the per-thread notes the lock interposers write on
 * their contended path ("thread T waits for lock X since t"), and the look
 * that turns them into cycles and stuck chains for /debug/pprof/deadlock
 * and the watch (deadlock_watch.c).
 *
 * The notes. A host thread takes one slot of a fixed array on its first
 * contended wait (found from its id: one search, then cached in a
 * thread-local pointer) and from then on a wait costs two stores before the
 * real blocking call and one after it, on a path that is about to sleep in
 * the kernel anyway; the uncontended lock never comes here
 * (docs/deadlock.md gives the callgrind counts). A slot whose thread is gone
 * is taken over by a new thread only when no free slot is left.
 *
 * The look, on the agent's threads only (an HTTP worker, the watch): the
 * notes of waits at least min_ns old; for each, the lock's holder read from
 * the lock itself (a mutex's __data.__owner, an rwlock's
 * __data.__cur_writer, a PI futex word's thread id), with process_vm_readv
 * so that a lock freed meanwhile is a failed read, never a fault. A thread
 * whose holder is itself a noted waiter follows it: back to a thread
 * already on the path is a cycle; to a holder that is not waiting on a
 * followed lock and is blocked in a system call (a read, a condition wait,
 * a sleep) a stuck chain. A holder that runs is doing its work: not listed.
 * The threads involved are walked from a copy of their stacks
 * (threads_walk_blocked: no signal is sent).
 */
#include "agent/locks/deadlock.h"
#include "agent/core/real.h"

#include "agent/stacks/cfi.h"
#include "agent/core/clock.h"
#include "agent/compiler.h"
#include "agent/locks/contention.h"
#include "agent/cpu/cpu.h"
#include "agent/guard.h"
#include "agent/core/next_symbol.h"
#include "agent/stacks/objects.h"
#include "agent/core/own_memory.h"
#include "agent/stacks/phdr_cache.h"
#include "agent/host/proc.h"
#include "agent/stacks/stack.h"
#include "agent/threads/threads.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define SLOTS 4096
#define PROBES 64

static struct deadlock_slot slots[SLOTS];
/* One past the highest slot ever taken: what a look scans. */
static int slots_used;
static long slots_lost;
/* The calling thread's slot, and the id it was taken for (a fork child's
 * thread keeps its parent's pointer: its id tells). */
static __thread struct deadlock_slot *mine;

static int self_tid(void)
{
    if (unlikely(agent_tls.tid == 0))
        agent_tls.tid = (int)real_syscall(SYS_gettid);
    return agent_tls.tid;
}

static int thread_alive(int tid)
{
    return real_syscall(SYS_tgkill, getpid(), tid, 0) == 0;
}

/* Takes slot i for tid when it is free (or, when take_dead, held by a
 * thread that is gone and not waiting). */
static int take(int i, int tid, int take_dead)
{
    struct deadlock_slot *s = &slots[i];
    int cur = __atomic_load_n(&s->tid, __ATOMIC_RELAXED);
    if (cur == tid)
        return 1;
    if (cur != 0 && (!take_dead || __atomic_load_n(&s->lock, __ATOMIC_RELAXED) ||
                     thread_alive(cur)))
        return 0;
    if (!__atomic_compare_exchange_n(&s->tid, &cur, tid, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED))
        return 0;
    int used = __atomic_load_n(&slots_used, __ATOMIC_RELAXED);
    while (used < i + 1 &&
           !__atomic_compare_exchange_n(&slots_used, &used, i + 1, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    return 1;
}

static __attribute__((noinline)) struct deadlock_slot *claim(int tid)
{
    size_t h = ((uint64_t)(unsigned)tid * 0x9e3779b97f4a7c15ULL) >> 52;
    for (int pass = 0; pass < 2; pass++)
        for (int p = 0; p < PROBES; p++) {
            int i = (int)((h + (size_t)p) & (SLOTS - 1));
            if (take(i, tid, pass)) {
                __atomic_store_n(&slots[i].lock, NULL, __ATOMIC_RELAXED);
                return mine = &slots[i];
            }
        }
    __atomic_fetch_add(&slots_lost, 1, __ATOMIC_RELAXED);
    return NULL;
}

struct deadlock_slot *deadlock_wait_begin(const void *lock, int kind,
                                          int64_t now)
{
    int tid = self_tid();
    struct deadlock_slot *s = mine;
    if (unlikely(!s || s->tid != tid) && !(s = claim(tid)))
        return NULL;
    /* Relaxed stores (plain moves): the look reads them as atomics. */
    __atomic_store_n(&s->kind, kind, __ATOMIC_RELAXED);
    __atomic_store_n(&s->since, now, __ATOMIC_RELAXED);
    __atomic_store_n(&s->lock, lock, __ATOMIC_RELEASE);
    return s;
}

/* ---- reading the notes ------------------------------------------------------ */

struct wait {
    int tid, kind, holder;
    const void *lock;
    int64_t since;
    int candidate; /* waited at least min_ns, thread alive */
    int next;      /* index of the holder's own wait among candidates, -1 */
    int color;     /* path search: 0 new, 1 on the path, 2 done */
    int in_cycle;
};

/* Slot i's wait, read consistently; 0 when it does not wait. */
static int read_slot(int i, struct wait *w)
{
    const struct deadlock_slot *s = &slots[i];
    const void *lock = __atomic_load_n(&s->lock, __ATOMIC_ACQUIRE);
    if (!lock)
        return 0;
    w->tid = __atomic_load_n(&s->tid, __ATOMIC_RELAXED);
    w->kind = __atomic_load_n(&s->kind, __ATOMIC_RELAXED);
    w->since = __atomic_load_n(&s->since, __ATOMIC_RELAXED);
    w->lock = lock;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&s->lock, __ATOMIC_RELAXED) == lock &&
           w->tid != 0;
}

/* A plain futex wait names no holder: a parked thread, a condition, or a
 * lock whose word keeps no owner. Neither counted nor looked at. */
static int has_owner(const struct wait *w)
{
    return w->kind != DEADLOCK_FUTEX;
}

size_t deadlock_waiting(void)
{
    size_t n = 0;
    int used = __atomic_load_n(&slots_used, __ATOMIC_ACQUIRE);
    for (int i = 0; i < used; i++) {
        struct wait w;
        n += read_slot(i, &w) && has_owner(&w);
    }
    return n;
}

int64_t deadlock_longest_wait(int64_t now)
{
    int64_t longest = 0;
    int used = __atomic_load_n(&slots_used, __ATOMIC_ACQUIRE);
    for (int i = 0; i < used; i++) {
        struct wait w;
        if (read_slot(i, &w) && has_owner(&w) && now - w.since > longest)
            longest = now - w.since;
    }
    return longest;
}

/* The holder of lock as the lock itself records it; 0 when it keeps none
 * (a read-held rwlock, a plain futex word) or cannot be read. */
static int read_owner(const void *lock, int kind)
{
    union {
        pthread_mutex_t m;
        pthread_rwlock_t rw;
        unsigned word;
    } u;
    size_t len = kind == DEADLOCK_MUTEX    ? sizeof u.m
                 : kind == DEADLOCK_RWLOCK ? sizeof u.rw
                 : kind == DEADLOCK_FUTEX_PI ? sizeof u.word
                                              : 0;
    if (!len)
        return 0;
    struct iovec local = {&u, len}, remote = {(void *)lock, len};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)len)
        return 0;
    switch (kind) {
    case DEADLOCK_MUTEX: return u.m.__data.__owner;
    case DEADLOCK_RWLOCK: return (int)u.rw.__data.__cur_writer;
    default: return (int)(u.word & 0x3fffffff); /* FUTEX_TID_MASK */
    }
}

/* ---- describing a thread ----------------------------------------------------- */

static pthread_mutex_t look_lock = PTHREAD_MUTEX_INITIALIZER;
static void *stack_copy; /* THREADS_COPY_MAX bytes, under look_lock */
static uintptr_t libc_lo, libc_hi;

static int in_libc(uintptr_t pc)
{
    return pc >= libc_lo && pc < libc_hi;
}

/* Name, state, system call and stack of t->tid (blocked: walked from a
 * copy of its stack; running: no stack). */
static void describe(struct deadlock_thread *t)
{
    static unsigned tables_at = ~0u;
    if (tables_at != objects_generation()) {
        /* Objects loaded since the last look are walked too. */
        tables_at = objects_generation();
        phdr_cache_refresh(0);
        cfi_tables_refresh();
    }
    t->state = proc_thread_state(t->tid, t->name, sizeof t->name);
    t->syscall = -1;
    struct thread_syscall st;
    if (threads_read_syscall(t->tid, &st) != 0)
        return;
    if (st.nr >= 0)
        t->syscall = st.nr;
    if (st.nr < 0 || !st.sp || !st.pc || !stack_copy)
        return;
    int depth = 0;
    if (threads_walk_blocked(NULL, t->tid, &st, -1, stack_copy, t->pcs,
                             DEADLOCK_STACK_MAX, &depth) != THREAD_STACK_OK)
        return;
    t->depth = depth;
    for (int f = 0; f < depth; f++) {
        uintptr_t pc = t->pcs[f];
        if (pc >= FRAME_PSEUDO_MAX && !in_libc(pc) && !stack_is_self(pc)) {
            t->waits_in = pc;
            break;
        }
    }
}

/* 1 when the thread blocks in a system call now (not running, not
 * runnable): what a holder at the end of a stuck chain does. */
static int blocked_in_call(int tid)
{
    struct thread_syscall st;
    if (threads_read_syscall(tid, &st) != 0 || st.nr < 0)
        return 0;
    char state = proc_thread_state(tid, NULL, 0);
    return state == 'S' || state == 'D';
}

/* ---- the look ----------------------------------------------------------------- */

static int add_thread(struct deadlock_group *g, const struct wait *w,
                      int holder_tid, int64_t now)
{
    struct deadlock_thread *t = &g->threads[g->n++];
    memset(t, 0, sizeof *t);
    if (w) {
        t->tid = w->tid;
        t->kind = w->kind;
        t->lock = w->lock;
        t->held_by = w->holder;
        t->blocked_ns = now - w->since;
    } else {
        t->tid = holder_tid;
    }
    describe(t);
    return 0;
}

static struct deadlock_group *new_group(struct deadlock_report *r, int type,
                                        size_t room)
{
    struct deadlock_group *more =
        real_realloc(r->groups, (r->n + 1) * sizeof *r->groups);
    if (!more)
        return NULL;
    r->groups = more;
    struct deadlock_group *g = &r->groups[r->n];
    g->type = type;
    g->n = 0;
    g->threads = real_calloc(room ? room : 1, sizeof *g->threads);
    if (!g->threads)
        return NULL;
    r->n++;
    return g;
}

/* Reads every noted wait into *out (malloc'd) with its holder. */
static int gather(struct wait **out, size_t *n, int64_t now, int64_t min_ns)
{
    int used = __atomic_load_n(&slots_used, __ATOMIC_ACQUIRE);
    struct wait *w = real_calloc(used ? (size_t)used : 1, sizeof *w);
    if (!w)
        return -ENOMEM;
    size_t k = 0;
    for (int i = 0; i < used; i++) {
        if (!read_slot(i, &w[k]))
            continue;
        w[k].holder = read_owner(w[k].lock, w[k].kind);
        w[k].candidate = now - w[k].since >= min_ns && w[k].holder > 0 &&
                         !cpu_is_agent_tid(w[k].tid) && thread_alive(w[k].tid);
        w[k].next = -1;
        k++;
    }
    /* The holder's own wait, among the candidates. */
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < k && w[i].candidate; j++)
            if (w[j].candidate && w[j].tid == w[i].holder)
                w[i].next = (int)j;
    *out = w;
    *n = k;
    return 0;
}

/* 1 when tid is noted waiting for a lock at all (any length; a plain
 * futex wait, a condition or a parker as often as a lock, does not count:
 * that is blocked elsewhere). */
static int is_waiter(const struct wait *w, size_t n, int tid)
{
    for (size_t i = 0; i < n; i++)
        if (w[i].tid == tid && has_owner(&w[i]))
            return 1;
    return 0;
}

static int find_cycles(struct deadlock_report *r, struct wait *w, size_t n,
                       int64_t now)
{
    int *path = real_malloc((n ? n : 1) * sizeof *path);
    if (!path)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!w[i].candidate || w[i].color)
            continue;
        size_t len = 0;
        int j = (int)i;
        while (j >= 0 && w[j].color == 0) {
            w[j].color = 1;
            path[len++] = j;
            j = w[j].next;
        }
        if (j >= 0 && w[j].color == 1) {
            size_t from = 0;
            while (path[from] != j)
                from++;
            struct deadlock_group *g =
                new_group(r, DEADLOCK_CYCLE, len - from);
            if (!g) {
                real_free(path);
                return -ENOMEM;
            }
            for (size_t p = from; p < len; p++) {
                w[path[p]].in_cycle = 1;
                add_thread(g, &w[path[p]], 0, now);
            }
        }
        for (size_t p = 0; p < len; p++)
            w[path[p]].color = 2;
    }
    real_free(path);
    return 0;
}

/* The last candidate of i's path (its holder is no candidate), or -1 when
 * the path runs into a cycle. *dist: how many steps away it is. */
static int chain_end(const struct wait *w, int i, int *dist)
{
    *dist = 0;
    while (!w[i].in_cycle && w[i].next >= 0) {
        i = w[i].next;
        ++*dist;
    }
    return w[i].in_cycle ? -1 : i;
}

/* 1 when e ends chains: a candidate outside any cycle whose holder is no
 * candidate, and is blocked elsewhere (not waiting for a lock at all). */
static int ends_chain(const struct wait *w, size_t n, size_t e)
{
    if (!w[e].candidate || w[e].in_cycle || w[e].next >= 0)
        return 0;
    int h = w[e].holder;
    return h != w[e].tid && !is_waiter(w, n, h) && !cpu_is_agent_tid(h) &&
           blocked_in_call(h);
}

/* The holder at the end of i's chain, 0 when it has none (a cycle, or a
 * holder that is not stuck). */
static int chain_holder(const struct wait *w, const int *ends, int i,
                        int *dist)
{
    int e = chain_end(w, i, dist);
    return e >= 0 && ends[e] ? w[e].holder : 0;
}

static int find_chains(struct deadlock_report *r, struct wait *w, size_t n,
                       int64_t now)
{
    int *ends = real_calloc(n ? n : 1, sizeof *ends);
    if (!ends)
        return -ENOMEM;
    for (size_t e = 0; e < n; e++)
        ends[e] = ends_chain(w, n, e);
    /* One group per stuck holder: its waiters, farthest first, then it. */
    for (size_t e = 0; e < n; e++) {
        int h = ends[e] ? w[e].holder : 0, first = 1;
        for (size_t f = 0; h && f < e; f++)
            if (ends[f] && w[f].holder == h)
                first = 0;
        if (!h || !first)
            continue;
        size_t members = 0;
        int far = 0, d;
        for (size_t i = 0; i < n; i++)
            if (w[i].candidate && chain_holder(w, ends, (int)i, &d) == h) {
                members++;
                if (d > far)
                    far = d;
            }
        struct deadlock_group *g = new_group(r, DEADLOCK_CHAIN, members + 1);
        if (!g) {
            real_free(ends);
            return -ENOMEM;
        }
        for (int want = far; want >= 0; want--)
            for (size_t i = 0; i < n; i++)
                if (w[i].candidate &&
                    chain_holder(w, ends, (int)i, &d) == h && d == want)
                    add_thread(g, &w[i], 0, now);
        add_thread(g, NULL, h, now);
    }
    real_free(ends);
    return 0;
}

static void look_prepare(void)
{
    if (!stack_copy) {
        void *p = mmap(NULL, THREADS_COPY_MAX, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            own_memory_add(p, THREADS_COPY_MAX);
            stack_copy = p;
        }
    }
    if (!libc_hi) {
        void *f = next_symbol("pthread_mutex_lock");
        if (!f || object_range_of(f, &libc_lo, &libc_hi) != 0)
            libc_lo = libc_hi = 1;
    }
}

int deadlock_look(int64_t min_ns, struct deadlock_report *out)
{
    memset(out, 0, sizeof *out);
    out->min_ns = min_ns;
    out->time_ns = agent_now_ns();
    out->slots_lost = __atomic_load_n(&slots_lost, __ATOMIC_RELAXED);
    real_pthread_mutex_lock(&look_lock);
    look_prepare();
    int64_t now = contention_clock();
    struct wait *w;
    size_t n;
    int err = gather(&w, &n, now, min_ns);
    if (err == 0) {
        for (size_t i = 0; i < n; i++)
            out->waiting += has_owner(&w[i]);
        err = find_cycles(out, w, n, now);
        if (err == 0)
            err = find_chains(out, w, n, now);
        real_free(w);
    }
    real_pthread_mutex_unlock(&look_lock);
    if (err)
        deadlock_report_free(out);
    return err;
}

void deadlock_report_free(struct deadlock_report *r)
{
    for (size_t i = 0; i < r->n; i++)
        real_free(r->groups[i].threads);
    real_free(r->groups);
    r->groups = NULL;
    r->n = 0;
}

uint64_t deadlock_cycle_key(const struct deadlock_group *g)
{
    /* A sum of per-thread mixes: the same whatever thread the cycle
     * starts at. */
    uint64_t k = 0;
    for (size_t i = 0; i < g->n; i++) {
        uint64_t x = (uint64_t)(unsigned)g->threads[i].tid << 32 ^
                     (uint64_t)(uintptr_t)g->threads[i].lock;
        x *= 0x9e3779b97f4a7c15ULL;
        k += x ^ (x >> 29);
    }
    return k;
}
