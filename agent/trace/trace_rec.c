/*
 * The execution trace's records (agent/trace/trace.h): one reservation cut into
 * chunks, each chunk owned by one thread for one trace, appended to by
 * that thread only; the HTTP worker reads them after the trace stopped.
 *
 * Writers: host threads inside interposers while trace_on is set. A writer
 * raises its chunk's busy count, checks again that the trace it belongs
 * to is still recording, writes, publishes the new length (release), and
 * lowers busy; trace_stop() clears trace_on and then waits until every
 * chunk handed out is idle, so that the reader sees whole records only. A
 * writer that saw the flag just before the stop finds the epoch changed
 * and backs out. Chunks are handed out with one atomic add; when none is
 * left the record is dropped and counted, never waited for.
 *
 * Stacks are taken with stack_capture_no_alloc(): a wait may be a lock
 * inside the host's allocator, so nothing here allocates or locks.
 */
#include "agent/trace/trace.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/cpu/cpu.h"
#include "agent/guard.h"
#include "agent/log.h"
#include "agent/host/proc.h"
#include "agent/host/signals.h"
#include "agent/stacks/stack.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_SIZE (16u << 10)
#define TRACE_MB_DEFAULT 64
#define THREADS_MAX 4096
#define STACK_DEPTH 64

struct chunk {
    uint32_t tid;
    uint32_t used;   /* bytes of records after the header (release) */
    uint32_t busy;   /* writers inside (0 or 1: only the owner writes) */
    uint32_t epoch;
    char data[CHUNK_SIZE - 16];
};

int trace_on;
void (*trace_route)(int on);
int64_t trace_started_ns, trace_stopped_ns;
uint64_t trace_dropped;

static int slot_taken;
static uint32_t epoch; /* this trace's number; 0: none yet */
static char *region;
static size_t region_chunks;
static uint64_t next_key;

/* The region is one half (a trace) or two (the flight recorder: epoch e
 * writes half e % 2 while the other keeps epoch e - 1). */
static int halves = 1;
static size_t half_chunks;
static uint32_t next_chunk[2]; /* chunks handed out in each half */
static int64_t epoch_started[2]; /* when the epoch in each half began */
static uint64_t dropped[2];      /* records dropped in each half's epoch */

/* The flight recorder (PPROF_TRACE_FLIGHT): an epoch's length, 0 when off;
 * a switch in progress; a snapshot being read (no switch meanwhile). */
static int64_t flight_ns;
static int switching;
static int snapshot_busy;

static struct trace_thread initial[THREADS_MAX];
static size_t initial_count;

/* This thread's chunk and the trace it belongs to. */
static __thread struct chunk *my_chunk
    __attribute__((tls_model("initial-exec")));
static __thread uint32_t my_epoch __attribute__((tls_model("initial-exec")));
static __thread uint32_t my_tid __attribute__((tls_model("initial-exec")));
/* Set while this thread writes a record: a signal handler's call on the
 * same thread then drops its record rather than write over it. */
static __thread int my_writing __attribute__((tls_model("initial-exec")));

int64_t trace_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

uint64_t trace_next_key(void)
{
    return __atomic_add_fetch(&next_key, 1, __ATOMIC_RELAXED);
}

static uint32_t self_tid(void)
{
    if (!my_tid)
        my_tid = (uint32_t)real_syscall(SYS_gettid);
    return my_tid;
}

/* A fresh chunk for this thread in trace e, or NULL (all handed out). */
static struct chunk *chunk_new(uint32_t e)
{
    uint32_t h = e % (uint32_t)halves;
    uint32_t i = __atomic_fetch_add(&next_chunk[h], 1, __ATOMIC_RELAXED);
    if (i >= half_chunks)
        return NULL;
    struct chunk *c =
        (struct chunk *)(region + (h * half_chunks + i) * CHUNK_SIZE);
    c->tid = self_tid();
    c->used = 0;
    c->busy = 0;
    __atomic_store_n(&c->epoch, e, __ATOMIC_RELEASE);
    my_chunk = c;
    my_epoch = e;
    return c;
}

/* The flight recorder's next epoch, begun by whichever writer first sees
 * the current one over (never while a snapshot is read): the other half,
 * which held the epoch before the current one, is emptied and written
 * from now on. Lock-free; nobody waits. */
static void flight_switch(uint32_t e, int64_t now)
{
    if (__atomic_load_n(&snapshot_busy, __ATOMIC_ACQUIRE))
        return;
    int expected = 0;
    if (!__atomic_compare_exchange_n(&switching, &expected, 1, 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    if (__atomic_load_n(&epoch, __ATOMIC_ACQUIRE) == e &&
        !__atomic_load_n(&snapshot_busy, __ATOMIC_SEQ_CST)) {
        uint32_t h = (e + 1) % 2;
        __atomic_store_n(&next_chunk[h], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&dropped[h], 0, __ATOMIC_RELAXED);
        epoch_started[h] = now;
        __atomic_store_n(&epoch, e + 1, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&switching, 0, __ATOMIC_RELEASE);
}

/* Room for size bytes in this thread's chunk, with busy raised; NULL when
 * the trace stopped or memory is full (counted). */
static struct chunk *reserve(size_t size, int64_t now)
{
    uint32_t e = __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
    if (flight_ns && now - epoch_started[e % 2] >= flight_ns) {
        flight_switch(e, now);
        e = __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
    }
    struct chunk *c = my_epoch == e ? my_chunk : NULL;
    if (c && c->used + size > sizeof c->data)
        c = NULL;
    if (!c && !(c = chunk_new(e))) {
        __atomic_fetch_add(&dropped[e % (uint32_t)halves], 1,
                           __ATOMIC_RELAXED);
        return NULL;
    }
    __atomic_store_n(&c->busy, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&trace_on, __ATOMIC_SEQ_CST) ||
        __atomic_load_n(&epoch, __ATOMIC_SEQ_CST) != e) {
        __atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
        return NULL;
    }
    return c;
}

static void record(int kind, uint64_t obj, int64_t t0, int64_t t1,
                   uint32_t peer, const char *text, size_t len)
{
    if (guard_active() || agent_tls.agent_thread || !region || my_writing)
        return;
    my_writing = 1;
    int saved = errno;
    uintptr_t pcs[STACK_DEPTH];
    int depth = stack_capture_no_alloc(pcs, STACK_DEPTH);
    if (len > TRACE_TEXT_MAX)
        len = TRACE_TEXT_MAX;
    size_t size = sizeof(struct trace_rec) + (size_t)depth * sizeof(uintptr_t)
                  + len;
    size = (size + 7) & ~(size_t)7;
    struct chunk *c = reserve(size, t1);
    if (c) {
        struct trace_rec *r = (struct trace_rec *)(c->data + c->used);
        r->kind = (uint8_t)kind;
        r->depth = (uint8_t)depth;
        r->size = (uint16_t)size;
        r->peer = peer;
        r->t0 = t0;
        r->t1 = t1;
        r->obj = obj;
        r->text_len = (uint16_t)len;
        if (depth) /* pcs may be NULL then */
            memcpy(r->pcs, pcs, (size_t)depth * sizeof(uintptr_t));
        if (len)
            memcpy((char *)(r->pcs + depth), text, len);
        __atomic_store_n(&c->used, c->used + (uint32_t)size, __ATOMIC_RELEASE);
        __atomic_store_n(&c->busy, 0, __ATOMIC_RELEASE);
    }
    my_writing = 0;
    errno = saved;
}

void trace_interval(int kind, uint64_t obj, int64_t t0, uint32_t peer)
{
    int saved = errno;
    int64_t t1 = trace_clock();
    errno = saved;
    record(kind, obj, t0, t1, peer, NULL, 0);
}

void trace_instant(int kind, uint64_t obj, uint32_t peer, const char *text,
                   size_t len)
{
    int saved = errno;
    int64_t t = trace_clock();
    errno = saved;
    record(kind, obj, t, t, peer, text, len);
}

uint32_t trace_lock_owner(const void *lock, int rwlock)
{
    /* glibc keeps the holder's thread id in the lock for every mutex kind
     * and the writer's in a rwlock; a reader-held rwlock names nobody. */
    if (rwlock)
        return (uint32_t)((const pthread_rwlock_t *)lock)->__data.__cur_writer;
    return (uint32_t)((const pthread_mutex_t *)lock)->__data.__owner;
}

/* Where glibc keeps a thread's kernel id in its thread record (the
 * struct behind pthread_t): found once on an agent thread, whose id is not
 * the process id, as the first word holding it; -1 until found or when
 * not found (joins then name nobody). */
static long tid_offset = -1;

static void find_tid_offset(void)
{
    if (tid_offset >= 0)
        return;
    int32_t tid = (int32_t)real_syscall(SYS_gettid);
    const int32_t *self = (const int32_t *)pthread_self();
    if (tid == getpid())
        return;
    for (long i = 0; i < 2048 / 4; i++)
        if (self[i] == tid) {
            __atomic_store_n(&tid_offset, i * 4, __ATOMIC_RELEASE);
            return;
        }
}

uint32_t trace_thread_tid(pthread_t t)
{
    long o = __atomic_load_n(&tid_offset, __ATOMIC_ACQUIRE);
    if (o < 0 || !t)
        return 0;
    int32_t tid = __atomic_load_n((const int32_t *)((const char *)t + o),
                                  __ATOMIC_RELAXED);
    return tid > 0 ? (uint32_t)tid : 0;
}

/* ---- the session --------------------------------------------------------- */

static int list_thread(void *arg, int tid, int dir_fd)
{
    (void)arg;
    (void)dir_fd;
    if (initial_count >= THREADS_MAX || cpu_is_agent_tid(tid))
        return 0;
    struct trace_thread *t = &initial[initial_count++];
    t->tid = (uint32_t)tid;
    t->state = proc_thread_state(tid, t->name, sizeof t->name);
    return 0;
}

size_t trace_initial_threads(const struct trace_thread **out)
{
    *out = initial;
    return initial_count;
}

/* Chunks handed out in half h. */
static size_t chunks_handed(uint32_t h)
{
    size_t n = __atomic_load_n(&next_chunk[h], __ATOMIC_ACQUIRE);
    return n < half_chunks ? n : half_chunks;
}

/*
 * Memory made present ahead of the writers. A chunk's first records used
 * to fault its pages in on the host's thread, one fault per 4 KiB, in the
 * middle of the call being recorded: on this project's test machine a
 * fault costs about 14 us (a virtual machine's trap), and a 500,000-read
 * trace took 10,770 of them. The session's thread instead asks the kernel
 * for the pages (MADV_POPULATE_WRITE, Linux 5.14) about every 50 ms: 1 MiB
 * beyond the chunks handed out, plus twice what was handed out since the
 * last time. A writer that outruns it faults as before. Present pages are
 * never written by the request, so the writers' pages are not disturbed.
 * Not for the flight recorder, whose two halves are filled again and
 * again and fault only in their first round.
 */
#define FILL_AHEAD_MIN 64 /* chunks: 1 MiB */
#define MADV_POPULATE_WRITE_ 23 /* <sys/mman.h> of older C libraries */

static size_t filled;      /* chunks of half 0 made present this trace */
static size_t handed_last; /* chunks handed out at the last fill */
static int fill_refused;   /* the kernel lacks it: never asked again */

void trace_fill_ahead(void)
{
    if (flight_ns || fill_refused || !__atomic_load_n(&trace_on,
                                                      __ATOMIC_ACQUIRE))
        return;
    size_t handed = chunks_handed(0);
    size_t want = handed + FILL_AHEAD_MIN + 2 * (handed - handed_last);
    handed_last = handed;
    if (want > half_chunks)
        want = half_chunks;
    if (want <= filled)
        return;
    if (filled < handed)
        filled = handed; /* present already: the writers faulted them */
    if (want > filled &&
        madvise(region + filled * CHUNK_SIZE, (want - filled) * CHUNK_SIZE,
                MADV_POPULATE_WRITE_) != 0 && errno == EINVAL)
        fill_refused = 1;
    filled = want;
}

/* PPROF_TRACE_MB, read by the constructor (trace_init). */
static long opt_trace_mb = TRACE_MB_DEFAULT;

static int reserve_region(void)
{
    if (region)
        return 0;
    size_t len = (size_t)opt_trace_mb << 20;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    region_chunks = len / CHUNK_SIZE;
    half_chunks = region_chunks / (size_t)halves;
    __atomic_store_n(&region, (char *)p, __ATOMIC_RELEASE);
    return 0;
}

int trace_start(void)
{
    if (flight_ns || session_take(&slot_taken))
        return -EBUSY;
    int err = reserve_region();
    if (err) {
        __atomic_store_n(&slot_taken, 0, __ATOMIC_RELEASE);
        return err;
    }
    initial_count = 0;
    proc_list("/proc/self/task", list_thread, NULL);
    find_tid_offset();
    trace_dropped = 0;
    uint32_t e = __atomic_load_n(&epoch, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&next_chunk[e % (uint32_t)halves], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&dropped[e % (uint32_t)halves], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&epoch, e, __ATOMIC_SEQ_CST);
    trace_started_ns = trace_clock();
    trace_stopped_ns = 0;
    filled = handed_last = 0;
    __atomic_store_n(&trace_on, 1, __ATOMIC_SEQ_CST);
    trace_fill_ahead();
    if (trace_route)
        trace_route(1);
    return 0;
}

void trace_stop(void)
{
    __atomic_store_n(&trace_on, 0, __ATOMIC_SEQ_CST);
    if (trace_route)
        trace_route(0);
    trace_stopped_ns = trace_clock();
    trace_dropped = __atomic_load_n(&dropped[0], __ATOMIC_RELAXED);
    /* A writer past its check finishes its record (a copy: microseconds);
     * one that never does (a thread stopped for good mid-record) is not
     * waited for past a moment: its half-written record is not published,
     * and the memory stays mapped. */
    size_t n = chunks_handed(0);
    for (size_t i = 0, spins = 0; i < n; i++) {
        struct chunk *c = (struct chunk *)(region + i * CHUNK_SIZE);
        while (__atomic_load_n(&c->busy, __ATOMIC_SEQ_CST) && spins++ < 100000)
            sched_yield();
    }
}

void trace_release(void)
{
    size_t n = chunks_handed(0);
    if (n < filled)
        n = filled;
    if (n)
        madvise(region, n * CHUNK_SIZE, MADV_DONTNEED);
    filled = 0;
    __atomic_store_n(&next_chunk[0], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&slot_taken, 0, __ATOMIC_RELEASE);
}

/* The records of epoch ep (in its half), chunk by chunk. */
typedef void each_fn(void *arg, uint32_t tid, const struct trace_rec *r);

static void each_of_epoch(uint32_t ep, each_fn *fn, void *arg)
{
    uint32_t h = ep % (uint32_t)halves;
    size_t n = chunks_handed(h);
    for (size_t i = 0; i < n; i++) {
        struct chunk *c =
            (struct chunk *)(region + (h * half_chunks + i) * CHUNK_SIZE);
        if (__atomic_load_n(&c->epoch, __ATOMIC_ACQUIRE) != ep)
            continue;
        uint32_t used = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);
        for (uint32_t off = 0; off + sizeof(struct trace_rec) <= used;) {
            const struct trace_rec *r = (const void *)(c->data + off);
            if (r->size < sizeof *r || off + r->size > used)
                break;
            fn(arg, c->tid, r);
            off += r->size;
        }
    }
}

void trace_each(void (*fn)(void *arg, uint32_t tid, const struct trace_rec *r),
                void *arg)
{
    uint32_t e = __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
    if (halves == 2 && e > 1)
        each_of_epoch(e - 1, fn, arg); /* the older first */
    each_of_epoch(e, fn, arg);
}

/* ---- the flight recorder ------------------------------------------------- */

void trace_init(void)
{
    const char *s = config_env("PPROF_TRACE_MB");
    if (s && *s && config_parse_long(s, 1, 1L << 20, &opt_trace_mb) < 0) {
        log_info("PPROF_TRACE_MB=%s: not a number of MiB (1 to 1048576); "
                 "using %d",
                 s, TRACE_MB_DEFAULT);
        opt_trace_mb = TRACE_MB_DEFAULT;
    }
    s = config_env("PPROF_TRACE_FLIGHT");
    long seconds = 0;
    if (!s || !*s)
        return;
    if (config_parse_long(s, 1, 3600, &seconds) < 0) {
        log_info("PPROF_TRACE_FLIGHT=%s: not a number of seconds (1 to "
                 "3600); no flight recorder",
                 s);
        return;
    }
    halves = 2;
    if (reserve_region() != 0) {
        halves = 1;
        log_info("PPROF_TRACE_FLIGHT: cannot reserve its memory; no flight "
                 "recorder");
        return;
    }
    flight_ns = seconds * 1000000000LL;
    epoch_started[1] = trace_started_ns = trace_clock();
    __atomic_store_n(&epoch, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&trace_on, 1, __ATOMIC_SEQ_CST);
    if (trace_route)
        trace_route(1);
}

int trace_flight_on(void)
{
    return flight_ns != 0;
}

int trace_flight_take(int64_t since)
{
    if (!flight_ns)
        return -ENOENT;
    if (session_take(&slot_taken))
        return -EBUSY;
    find_tid_offset();
    __atomic_store_n(&snapshot_busy, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&switching, __ATOMIC_ACQUIRE))
        sched_yield();
    uint32_t e = __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
    int64_t oldest = epoch_started[(e > 1 ? e - 1 : e) % 2];
    trace_started_ns = since > oldest ? since : oldest;
    trace_stopped_ns = trace_clock();
    trace_dropped = __atomic_load_n(&dropped[0], __ATOMIC_RELAXED) +
                    __atomic_load_n(&dropped[1], __ATOMIC_RELAXED);
    initial_count = 0;
    proc_list("/proc/self/task", list_thread, NULL);
    return 0;
}

void trace_flight_give(void)
{
    __atomic_store_n(&snapshot_busy, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&slot_taken, 0, __ATOMIC_RELEASE);
}

FORK_PATH void trace_fork_child(void)
{
    /* The child's one thread starts untraced (a flight recorder stays the
     * parent's); its cached id is the parent's. The routes change only if
     * a trace ran (arm_clear() rerouted for the start's flag). */
    int was_on = __atomic_load_n(&trace_on, __ATOMIC_RELAXED);
    FORK_SET(flight_ns, 0);
    FORK_SET_ATOMIC(snapshot_busy, 0);
    FORK_SET_ATOMIC(trace_on, 0);
    if (was_on && trace_route)
        trace_route(0);
    FORK_SET_ATOMIC(slot_taken, 0);
    FORK_SET(my_tid, 0);
    FORK_SET(my_chunk, NULL);
    FORK_SET(my_epoch, 0);
}
