/*
 * The execution trace's model: what agent/trace/ recorded, as Go's
 * scheduler would have told it, written through encoder/trace_wire.c.
 *
 * Each native thread is one goroutine (its id is the thread id) that runs
 * on its own M (the thread id) and its own P (the thread's index), and
 * never migrates: so the parser's invariants hold for any thread count,
 * and a P's row in the viewer is a thread. A thread's goroutine is named
 * by its thread name: the stack of its first status (or creation) is one
 * made-up frame with that name, which is what Go's goroutine analysis
 * groups by, and a label carries it in the timeline.
 *
 * A wait is a block (reason "sync", "sync.(*Cond).Wait", "network",
 * "sleep", so that Go's views file it in the synchronization or network
 * blocking profile, or in neither for a sleep) ended by an unblock on the
 * thread that ended it when known (a mutex's holder), else on the waiter's
 * own; a blocking call is a system call. A wait already under way when
 * the trace started opens the trace in that state, without a reason (Go
 * counts it in no profile, as for its own goroutines); a call still under
 * way when it stopped is absent.
 *
 * Runs on one HTTP worker, between trace_stop() and trace_release().
 */
#include "encoder/encoder.h"
#include "agent/core/real.h"

#include "agent/core/array.h"
#include "agent/log.h"
#include "agent/host/proc.h"
#include "agent/trace/trace.h"
#include "encoder/trace_wire.h"

#include <stdlib.h>
#include <string.h>

#define NO_THREAD UINT64_MAX
#define NAME_PC_BASE 0x1000 /* made-up frames: below any mapped code */
#define NAME_PC_COUNT 0xe000
#define REGIONS_MAX 64

struct thread {
    uint32_t tid;
    char first_name[16];
    char first_state; /* /proc's letter when the trace started, or 0 */
    int unknown_wait;  /* waiting in a call the agent does not see */
    const char *name; /* the name to show (points into a record or here) */
    char live_name[16];
    const struct trace_rec **recs;
    size_t nrecs, cap;
    int created;       /* its creation is in the trace */
    int create_written; /* and its creator's timeline wrote it */
    int64_t begins;     /* when its timeline opens (for the order) */
    uint64_t name_stack;
    /* the timeline being written */
    int state; /* 0 not started, 1 running, 2 waiting, 3 syscall, 4 gone */
    uint64_t seq, pseq;
    int64_t last;
    int labelled;
    const struct trace_rec *regions[REGIONS_MAX];
    int nregions;
};

struct model {
    struct tw w;
    struct thread *th;
    size_t nth, th_cap;
    struct htab tid_index;
    uint64_t *start_keys; /* key of each thread's START, 0: none */
    int64_t w0, w1;
    int noted; /* the dropped-events note is written */
    int oom;
};

static int tid_eq(const void *ctx, size_t idx, const void *key)
{
    const struct model *m = ctx;
    return m->th[idx].tid == *(const uint32_t *)key;
}

/* The index of thread tid, added when new; -1 when memory ran out. */
static long thread_of(struct model *m, uint32_t tid, int add)
{
    uint64_t h = hash_splitmix64(tid);
    struct htab_slot *sl =
        add ? htab_find_for_insert(&m->tid_index, h, tid_eq, m, &tid)
            : htab_find(&m->tid_index, h, tid_eq, m, &tid);
    if (!sl) {
        m->oom |= add;
        return -1;
    }
    if (sl->idx1)
        return (long)sl->idx1 - 1;
    if (!add)
        return -1;
    if (ARRAY_RESERVE(m->th, m->th_cap, m->nth + 1, 64) != 0) {
        m->oom = 1;
        return -1;
    }
    memset(&m->th[m->nth], 0, sizeof m->th[0]);
    m->th[m->nth].tid = tid;
    htab_set(&m->tid_index, sl, h, m->nth);
    return (long)m->nth++;
}

static void add_record(void *arg, uint32_t tid, const struct trace_rec *r)
{
    struct model *m = arg;
    long i = thread_of(m, tid, 1);
    if (i < 0)
        return;
    struct thread *t = &m->th[i];
    if (ARRAY_RESERVE(t->recs, t->cap, t->nrecs + 1, 64) != 0) {
        m->oom = 1;
        return;
    }
    t->recs[t->nrecs++] = r;
}

static const char *rec_text(const struct trace_rec *r)
{
    return (const char *)(r->pcs + r->depth);
}

/* ---- names and creations ------------------------------------------------- */

static void name_threads(struct model *m)
{
    for (size_t i = 0; i < m->nth; i++) {
        struct thread *t = &m->th[i];
        t->name = NULL;
        for (size_t k = 0; k < t->nrecs; k++) {
            const struct trace_rec *r = t->recs[k];
            if ((r->kind == TRACE_RENAME || r->kind == TRACE_EXIT) &&
                r->text_len) {
                size_t n = r->text_len < 15 ? r->text_len : 15;
                memcpy(t->live_name, rec_text(r), n);
                t->live_name[n] = 0;
                t->name = t->live_name;
            }
        }
        if (!t->name && proc_thread_name((int)t->tid, t->live_name,
                                         sizeof t->live_name) > 0)
            t->name = t->live_name;
        if (!t->name && t->first_name[0])
            t->name = t->first_name;
        if (!t->name) {
            log_snprintf(t->live_name, sizeof t->live_name, "thread %u",
                         t->tid);
            t->name = t->live_name;
        }
        uintptr_t pc = NAME_PC_BASE + (i < NAME_PC_COUNT ? i : NAME_PC_COUNT);
        tw_name_frame(&m->w, pc, t->name);
        t->name_stack = tw_stack(&m->w, &pc, 1);
    }
}

/* The thread whose START carries key, or -1. */
static long started_by_key(const struct model *m, uint64_t key)
{
    for (size_t i = 0; i < m->nth; i++)
        if (m->start_keys[i] == key)
            return (long)i;
    return -1;
}

static void find_creations(struct model *m)
{
    m->start_keys = real_calloc(m->nth ? m->nth : 1, sizeof *m->start_keys);
    if (!m->start_keys) {
        m->oom = 1;
        return;
    }
    for (size_t i = 0; i < m->nth; i++)
        for (size_t k = 0; k < m->th[i].nrecs; k++)
            if (m->th[i].recs[k]->kind == TRACE_START)
                m->start_keys[i] = m->th[i].recs[k]->obj;
    for (size_t i = 0; i < m->nth; i++)
        for (size_t k = 0; k < m->th[i].nrecs; k++) {
            const struct trace_rec *r = m->th[i].recs[k];
            long c = r->kind == TRACE_CREATE ? started_by_key(m, r->obj) : -1;
            if (c >= 0 && r->t0 >= m->w0)
                m->th[c].created = 1;
        }
}

/* ---- one thread's timeline ----------------------------------------------- */

static void ev(struct model *m, size_t i, int64_t t, int type, int nargs,
               uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
               uint64_t a4)
{
    struct thread *th = &m->th[i];
    if (t < th->last)
        t = th->last;
    th->last = t;
    uint64_t args[5] = {a0, a1, a2, a3, a4};
    tw_event(&m->w, (uint32_t)i, t, type, nargs, args);
}

static uint64_t stack_of(struct model *m, const struct trace_rec *r)
{
    return tw_stack(&m->w, r->pcs, r->depth);
}

/* The goroutine runs again: its label (once) and, on the first thread
 * that runs, the note that events were dropped. */
static void running(struct model *m, size_t i, int64_t t)
{
    struct thread *th = &m->th[i];
    th->state = 1;
    if (!th->labelled) {
        th->labelled = 1;
        uint64_t name = tw_string(&m->w, th->name, strlen(th->name));
        ev(m, i, t, TW_GO_LABEL, 1, name, 0, 0, 0, 0);
    }
    if (trace_dropped && !m->noted) {
        m->noted = 1;
        char note[160];
        log_snprintf(note, sizeof note,
                 "%llu events dropped: the trace outgrew its memory "
                 "(PPROF_TRACE_MB)",
                 (unsigned long long)trace_dropped);
        ev(m, i, t, TW_USER_LOG, 4, 0, tw_string(&m->w, "pprofagent", 10),
           tw_string(&m->w, note, strlen(note)), 0, 0);
    }
}

static int is_interval(int kind)
{
    return kind >= TRACE_SYNC && kind <= TRACE_SLEEP;
}

static const char *reason(int kind)
{
    switch (kind) {
    case TRACE_COND: return "sync.(*Cond).Wait";
    case TRACE_NET: return "network";
    case TRACE_SLEEP: return "sleep";
    default: return "sync";
    }
}

/* Opens thread i's timeline at time t, in the state of its first record
 * when that began earlier. */
static void open_thread(struct model *m, size_t i, int64_t t,
                        const struct trace_rec *first)
{
    struct thread *th = &m->th[i];
    uint64_t g = th->tid;
    th->last = t;
    if (th->create_written) {
        ev(m, i, t, TW_PROC_STATUS, 2, i, TW_PROC_RUNNING, 0, 0, 0);
        ev(m, i, t, TW_GO_START, 2, g, ++th->seq, 0, 0, 0);
        running(m, i, t);
        return;
    }
    int straddles = first && is_interval(first->kind) && first->t0 < t;
    int syscall = straddles && first->kind == TRACE_SYSCALL;
    if (!straddles && (th->first_state == 'S' || th->first_state == 'D')) {
        straddles = 1; /* asleep in a call the agent does not see */
        th->unknown_wait = 1;
    }
    ev(m, i, t, TW_PROC_STATUS, 2, i,
       syscall ? TW_PROC_SYSCALL : TW_PROC_RUNNING, 0, 0, 0);
    ev(m, i, t, TW_GO_STATUS_STACK, 4, g, syscall ? th->tid : NO_THREAD,
       !straddles ? TW_GO_RUNNING : syscall ? TW_GO_SYSCALL : TW_GO_WAITING,
       th->name_stack, 0);
    if (!straddles)
        running(m, i, t);
    else
        th->state = syscall ? 3 : 2;
}

/* The end of a wait of thread i at t, unblocked by thread peer if known. */
static void wake(struct model *m, size_t i, int64_t t, uint32_t peer)
{
    struct thread *th = &m->th[i];
    long by = peer && peer != th->tid ? thread_of(m, peer, 0) : -1;
    uint64_t g = th->tid;
    if (by >= 0) {
        uint64_t args[5] = {g, ++th->seq, 0};
        tw_event(&m->w, (uint32_t)by, t < th->last ? th->last : t,
                 TW_GO_UNBLOCK, 3, args);
    } else {
        ev(m, i, t, TW_GO_UNBLOCK, 3, g, ++th->seq, 0, 0, 0);
    }
    ev(m, i, t, TW_GO_START, 2, g, ++th->seq, 0, 0, 0);
    running(m, i, t);
}

static void interval(struct model *m, size_t i, const struct trace_rec *r)
{
    struct thread *th = &m->th[i];
    if (th->unknown_wait) {
        th->unknown_wait = 0;
        wake(m, i, r->t0, 0);
    }
    if (th->state == 3) { /* a call under way at the start */
        ev(m, i, r->t1, TW_GO_SYSCALL_END, 0, 0, 0, 0, 0, 0);
        running(m, i, r->t1);
        return;
    }
    if (th->state == 2) {
        wake(m, i, r->t1, r->peer);
        return;
    }
    if (th->state != 1 || r->t0 < th->last)
        return; /* overlaps the one before (a signal handler's call) */
    if (r->kind == TRACE_SYSCALL) {
        ev(m, i, r->t0, TW_GO_SYSCALL_BEGIN, 2, ++th->pseq, stack_of(m, r), 0,
           0, 0);
        ev(m, i, r->t1, TW_GO_SYSCALL_END, 0, 0, 0, 0, 0, 0);
        return;
    }
    const char *why = reason(r->kind);
    ev(m, i, r->t0, TW_GO_BLOCK, 2, tw_string(&m->w, why, strlen(why)),
       stack_of(m, r), 0, 0, 0);
    th->state = 2;
    wake(m, i, r->t1, r->peer);
}

/* A user region's end only when it closes the innermost one this trace
 * saw begin (or none began): anything else would break the trace. */
static int region_closes(struct thread *th, const struct trace_rec *r)
{
    if (th->nregions == 0)
        return 1;
    const struct trace_rec *b = th->regions[th->nregions - 1];
    if (b->obj != r->obj || b->text_len != r->text_len ||
        memcmp(rec_text(b), rec_text(r), r->text_len) != 0)
        return 0;
    th->nregions--;
    return 1;
}

static void instant(struct model *m, size_t i, const struct trace_rec *r)
{
    struct thread *th = &m->th[i];
    if (th->unknown_wait) {
        th->unknown_wait = 0;
        wake(m, i, r->t0, 0);
    }
    if (th->state != 1)
        return;
    const char *text = rec_text(r);
    uint64_t s = 0;
    switch (r->kind) {
    case TRACE_CREATE: {
        long c = started_by_key(m, r->obj);
        if (c >= 0 && m->th[c].created && !m->th[c].create_written) {
            ev(m, i, r->t0, TW_GO_CREATE, 3, m->th[c].tid, m->th[c].name_stack,
               stack_of(m, r), 0, 0);
            m->th[c].create_written = 1;
        }
        break;
    }
    case TRACE_EXIT:
        ev(m, i, r->t0, TW_GO_DESTROY, 0, 0, 0, 0, 0, 0);
        ev(m, i, r->t0, TW_PROC_STOP, 0, 0, 0, 0, 0, 0);
        th->state = 4;
        break;
    case TRACE_RENAME:
        ev(m, i, r->t0, TW_GO_LABEL, 1, tw_string(&m->w, text, r->text_len), 0,
           0, 0, 0);
        break;
    case TRACE_TASK_BEGIN:
        ev(m, i, r->t0, TW_USER_TASK_BEGIN, 4, r->obj, r->peer,
           tw_string(&m->w, text, r->text_len), stack_of(m, r), 0);
        break;
    case TRACE_TASK_END:
        ev(m, i, r->t0, TW_USER_TASK_END, 2, r->obj, stack_of(m, r), 0, 0, 0);
        break;
    case TRACE_REGION_BEGIN:
        if (th->nregions == REGIONS_MAX)
            break;
        th->regions[th->nregions++] = r;
        ev(m, i, r->t0, TW_USER_REGION_BEGIN, 3, r->obj,
           tw_string(&m->w, text, r->text_len), stack_of(m, r), 0, 0);
        break;
    case TRACE_REGION_END:
        if (region_closes(th, r))
            ev(m, i, r->t0, TW_USER_REGION_END, 3, r->obj,
               tw_string(&m->w, text, r->text_len), stack_of(m, r), 0, 0);
        break;
    case TRACE_LOG: {
        size_t klen = strnlen(text, r->text_len);
        size_t vlen = klen < r->text_len ? r->text_len - klen - 1 : 0;
        s = tw_string(&m->w, text + klen + 1, vlen);
        ev(m, i, r->t0, TW_USER_LOG, 4, r->obj, tw_string(&m->w, text, klen), s,
           stack_of(m, r), 0);
        break;
    }
    default:
        break;
    }
}

/* A thread belongs in the window unless it ended before it, or is known
 * only from records all older (the flight recorder keeps such). */
static int in_window(const struct model *m, const struct thread *th)
{
    int seen = th->first_state != 0;
    for (size_t k = 0; k < th->nrecs; k++) {
        const struct trace_rec *r = th->recs[k];
        if (r->kind == TRACE_EXIT && r->t0 < m->w0)
            return 0;
        seen |= r->t1 >= m->w0;
    }
    return seen;
}

static void write_thread(struct model *m, size_t i)
{
    struct thread *th = &m->th[i];
    if (!in_window(m, th))
        return;
    int64_t start = m->w0;
    size_t k = 0;
    for (; k < th->nrecs; k++) {
        const struct trace_rec *r = th->recs[k];
        if (r->kind == TRACE_START && (th->created || r->t0 >= m->w0)) {
            start = r->t0 > m->w0 ? r->t0 : m->w0;
            k++;
            break;
        }
    }
    if (k == th->nrecs && start == m->w0)
        k = 0; /* no start in the trace: it was there before */
    const struct trace_rec *first = NULL;
    for (size_t j = k; j < th->nrecs && !first; j++)
        if (th->recs[j]->t1 >= start && th->recs[j]->kind != TRACE_START)
            first = th->recs[j];
    open_thread(m, i, start, first);
    for (; k < th->nrecs && th->state != 4; k++) {
        const struct trace_rec *r = th->recs[k];
        if (r->t1 < start || r->t1 > m->w1)
            continue;
        if (is_interval(r->kind))
            interval(m, i, r);
        else
            instant(m, i, r);
    }
}

/* When each thread's timeline opens: its start in the window, else the
 * window's start. */
static void set_begins(struct model *m)
{
    for (size_t i = 0; i < m->nth; i++) {
        struct thread *th = &m->th[i];
        th->begins = m->w0;
        for (size_t k = 0; k < th->nrecs; k++)
            if (th->recs[k]->kind == TRACE_START && th->recs[k]->t0 > m->w0)
                th->begins = th->recs[k]->t0;
    }
}

static int by_begin(const void *a, const void *b, void *arg)
{
    const struct model *m = arg;
    const struct thread *x = &m->th[*(const size_t *)a];
    const struct thread *y = &m->th[*(const size_t *)b];
    int c = ORDER(x->begins, y->begins);
    return c ? c : ORDER(*(const size_t *)a, *(const size_t *)b);
}

/* ---- CPU samples --------------------------------------------------------- */

static void add_samples(struct model *m, const struct trace_sample *s, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (s[k].t < m->w0 || s[k].t > m->w1)
            continue;
        long i = thread_of(m, s[k].tid, 0);
        if (i < 0)
            continue;
        tw_cpu_sample(&m->w, s[k].t, s[k].tid, (uint64_t)i, s[k].tid,
                      tw_stack(&m->w, s[k].pcs, s[k].depth));
    }
}

/* ---- the whole trace ----------------------------------------------------- */

int trace_write(const struct trace_sample *samples, size_t nsamples,
                struct pbuf *out)
{
    struct model m = {0};
    m.w0 = trace_started_ns;
    m.w1 = trace_stopped_ns;
    m.w.t0 = m.w0;
    const struct trace_thread *init;
    size_t ninit = trace_initial_threads(&init);
    for (size_t k = 0; k < ninit; k++) {
        long i = thread_of(&m, init[k].tid, 1);
        if (i >= 0) {
            memcpy(m.th[i].first_name, init[k].name, sizeof init[k].name);
            m.th[i].first_state = init[k].state;
        }
    }
    trace_each(add_record, &m);
    find_creations(&m);
    name_threads(&m);
    set_begins(&m);
    m.w.thread_ids = real_calloc(m.nth ? m.nth : 1, sizeof *m.w.thread_ids);
    size_t *order = real_malloc((m.nth ? m.nth : 1) * sizeof *order);
    if (!m.w.thread_ids || !order)
        m.oom = 1;
    for (size_t i = 0; i < m.nth && !m.oom; i++) {
        m.w.thread_ids[i] = m.th[i].tid;
        order[i] = i;
    }
    /* Creators before the threads they created: a thread's start is
     * written as created only where its creator's timeline wrote the
     * creation. */
    if (!m.oom)
        qsort_r(order, m.nth, sizeof *order, by_begin, &m);
    for (size_t k = 0; k < m.nth && !m.oom; k++)
        write_thread(&m, order[k]);
    real_free(order);
    add_samples(&m, samples, nsamples);
    int err = m.oom ? -1 : tw_finish(&m.w, out);
    for (size_t i = 0; i < m.nth; i++)
        real_free(m.th[i].recs);
    real_free(m.th);
    real_free(m.start_keys);
    htab_free(&m.tid_index);
    tw_free(&m.w);
    return err;
}
