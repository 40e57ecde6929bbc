/*
 * The wire format of Go's execution trace (version 2, as Go 1.26 writes
 * it; the event numbers and arguments are Go's internal/trace/tracev2):
 * the header, then one generation: each thread's events in batches of at
 * most 64 KiB with time deltas, the string and stack tables, the CPU
 * samples, the sync batch (frequency: nanoseconds; the clock snapshot),
 * and the end-of-generation mark.
 *
 * encoder/trace.c decides what happened; this file only keeps the tables
 * (strings, stacks, program counters with their symbols) and the events,
 * and writes them out. Runs on one HTTP worker; plain malloc.
 */
#include "encoder/trace_wire.h"
#include "agent/core/real.h"

#include "agent/core/array.h"
#include "agent/core/hash.h"
#include "agent/log.h"
#include "agent/stacks/stack_table.h"
#include "agent/symbols/symbols.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Event types (tracev2.EventType values). */
enum {
    EV_EVENT_BATCH = 1,
    EV_STACKS = 2,
    EV_STACK = 3,
    EV_STRINGS = 4,
    EV_STRING = 5,
    EV_CPU_SAMPLES = 6,
    EV_CPU_SAMPLE = 7,
    EV_FREQUENCY = 8,
    EV_SYNC = 50,
    EV_CLOCK_SNAPSHOT = 51,
    EV_END_OF_GENERATION = 52,
};

#define BATCH_MAX (60u << 10) /* under tracev2.MaxBatchSize, 64 KiB */
#define STRING_MAX 1024       /* tracev2.MaxEventTrailerDataSize */
#define FRAMES_MAX 128        /* tracev2.MaxFramesPerStack */
#define NO_THREAD UINT64_MAX  /* a batch that belongs to no thread */

/* Room for want entries in a table of w; 0, or -1 with w->oom set. */
#define RESERVE(w, v, cap, want)                                              \
    (ARRAY_RESERVE((v), (cap), (want), 64) == 0 ? 0 : ((w)->oom = 1, -1))

/* ---- strings ------------------------------------------------------------- */

static int str_eq(const void *ctx, size_t idx, const void *key)
{
    const struct tw *w = ctx;
    const struct tw_str *k = key;
    return w->strs[idx].len == k->len &&
           memcmp(w->strs[idx].s, k->s, k->len) == 0;
}

uint64_t tw_string(struct tw *w, const char *s, size_t len)
{
    if (len > STRING_MAX)
        len = STRING_MAX;
    struct tw_str k = {(char *)s, len};
    uint64_t h = htab_hash_bytes(s, len, 0x7374);
    struct htab_slot *sl;
    size_t found = htab_lookup(&w->str_index, h, str_eq, w, &k, &sl, &w->oom);
    if (found || !sl)
        return found;
    char *copy = real_malloc(len + 1);
    if (RESERVE(w, w->strs, w->strs_cap, w->nstrs + 1) != 0 || !copy) {
        real_free(copy);
        w->oom = 1;
        return 0;
    }
    memcpy(copy, s, len);
    copy[len] = 0;
    w->strs[w->nstrs] = (struct tw_str){copy, len};
    htab_set(&w->str_index, sl, h, w->nstrs);
    return ++w->nstrs; /* ids from 1 */
}

/* ---- program counters and stacks ----------------------------------------- */

static int pc_eq(const void *ctx, size_t idx, const void *key)
{
    const struct tw *w = ctx;
    return w->pcs[idx].pc == *(const uintptr_t *)key;
}

/* The index of pc in the table (added with name when new; name NULL: to
 * be symbolized). */
static size_t pc_index(struct tw *w, uintptr_t pc, const char *name)
{
    uint64_t h = hash_splitmix64(pc);
    struct htab_slot *sl;
    size_t found = htab_lookup(&w->pc_index, h, pc_eq, w, &pc, &sl, &w->oom);
    if (found || !sl)
        return found ? found - 1 : 0;
    if (RESERVE(w, w->pcs, w->pcs_cap, w->npcs + 1) != 0)
        return 0;
    w->pcs[w->npcs] = (struct tw_pc){.pc = pc};
    if (name)
        w->pcs[w->npcs].func = tw_string(w, name, strlen(name));
    htab_set(&w->pc_index, sl, h, w->npcs);
    return w->npcs++;
}

void tw_name_frame(struct tw *w, uintptr_t pc, const char *name)
{
    pc_index(w, pc, name);
}

static int stack_eq(const void *ctx, size_t idx, const void *key)
{
    const struct tw *w = ctx;
    const struct tw_stack *k = key;
    const struct tw_stack *s = &w->stacks[idx];
    return s->n == k->n &&
           memcmp(w->frames + s->first, k->pcs, k->n * sizeof(uintptr_t)) == 0;
}

uint64_t tw_stack(struct tw *w, const uintptr_t *pcs, size_t n)
{
    if (n == 0)
        return 0;
    if (n > FRAMES_MAX)
        n = FRAMES_MAX;
    struct tw_stack k = {.n = n, .pcs = pcs};
    uint64_t h = htab_hash_bytes(pcs, n * sizeof *pcs, 0x5354);
    struct htab_slot *sl;
    size_t found =
        htab_lookup(&w->stack_index, h, stack_eq, w, &k, &sl, &w->oom);
    if (found || !sl)
        return found;
    if (RESERVE(w, w->stacks, w->stacks_cap, w->nstacks + 1) != 0 ||
        RESERVE(w, w->frames, w->frames_cap, w->nframes + n) != 0)
        return 0;
    if (n) /* pcs may be NULL then */
        memcpy(w->frames + w->nframes, pcs, n * sizeof *pcs);
    w->stacks[w->nstacks] = (struct tw_stack){.first = w->nframes, .n = n};
    w->nframes += n;
    for (size_t i = 0; i < n; i++)
        pc_index(w, pcs[i], NULL);
    htab_set(&w->stack_index, sl, h, w->nstacks);
    return ++w->nstacks;
}

/* Function, file and line of every program counter not named yet. */
static void symbolize(struct tw *w)
{
    symbols_lock();
    symbols_refresh();
    for (size_t i = 0; i < w->npcs; i++) {
        struct tw_pc *p = &w->pcs[i];
        if (p->func)
            continue;
        const char *pseudo = symbols_pseudo_name(p->pc);
        struct sym_frame f[8];
        int n = pseudo ? 0 : symbols_resolve(p->pc, f, 8);
        char hex[32];
        const char *name = pseudo;
        /* One frame per address: the function the address is in (the
         * outermost of an inlined chain), at the line it is in there. */
        const struct sym_frame *o = n > 0 ? &f[n - 1] : NULL;
        if (!name && o && o->name)
            name = o->name;
        if (!name) {
            log_snprintf(hex, sizeof hex, "0x%lx", (unsigned long)p->pc);
            name = hex;
        }
        p->func = tw_string(w, name, strlen(name));
        const char *file = o && o->file ? o->file : "";
        if (!*file) {
            int m = symbols_mapping_index(p->pc);
            if (m >= 0)
                file = symbols_mapping_at((size_t)m)->path;
        }
        p->file = tw_string(w, file, strlen(file));
        p->line = o && o->line > 0 ? (uint64_t)o->line : 0;
    }
    symbols_unlock();
}

/* ---- events -------------------------------------------------------------- */

void tw_event(struct tw *w, uint32_t m, int64_t t, int type, int nargs,
              const uint64_t *args)
{
    if (RESERVE(w, w->evs, w->evs_cap, w->nevs + 1) != 0)
        return;
    struct tw_ev *e = &w->evs[w->nevs];
    e->t = t;
    e->m = m;
    e->ord = (uint32_t)w->nevs++;
    e->type = (uint8_t)type;
    e->nargs = (uint8_t)nargs;
    for (int i = 0; i < nargs && i < 5; i++)
        e->args[i] = args[i];
}

void tw_cpu_sample(struct tw *w, int64_t t, uint64_t m, uint64_t p,
                   uint64_t g, uint64_t stack)
{
    if (RESERVE(w, w->cpu, w->cpu_cap, w->ncpu + 1) != 0)
        return;
    w->cpu[w->ncpu++] = (struct tw_cpu){t, m, p, g, stack};
}

static int ev_order(const void *a, const void *b)
{
    const struct tw_ev *x = a, *y = b;
    int c = ORDER(x->m, y->m);
    if (c == 0)
        c = ORDER(x->t, y->t);
    return c ? c : ORDER(x->ord, y->ord);
}

/* ---- batches ------------------------------------------------------------- */

static void put_byte(struct pbuf *b, uint8_t c)
{
    pbuf_append(b, &c, 1);
}

/* Writes one batch of body for thread m (NO_THREAD: none) at time t. */
static void batch(struct tw *w, uint64_t m, int64_t t, const struct pbuf *body)
{
    put_byte(&w->out, EV_EVENT_BATCH);
    pb_varint(&w->out, 1); /* the generation */
    pb_varint(&w->out, m);
    pb_varint(&w->out, (uint64_t)t);
    pb_varint(&w->out, body->len);
    pbuf_append(&w->out, body->data, body->len);
}

static void write_events(struct tw *w)
{
    qsort(w->evs, w->nevs, sizeof *w->evs, ev_order);
    struct pbuf body = {0};
    for (size_t i = 0; i < w->nevs;) {
        uint32_t m = w->evs[i].m;
        int64_t base = w->evs[i].t, last = base;
        body.len = 0;
        for (; i < w->nevs && w->evs[i].m == m && body.len < BATCH_MAX; i++) {
            const struct tw_ev *e = &w->evs[i];
            put_byte(&body, e->type);
            pb_varint(&body, (uint64_t)(e->t - last));
            last = e->t;
            for (int a = 0; a < e->nargs; a++)
                pb_varint(&body, e->args[a]);
        }
        batch(w, w->thread_ids[m], base, &body);
    }
    pbuf_free(&body);
}

/* Writes a table as batches that start with section, each under the size
 * limit; entry i appended by fn. */
static void write_table(struct tw *w, int section, size_t n,
                        void (*fn)(struct tw *w, size_t i, struct pbuf *b))
{
    struct pbuf body = {0};
    for (size_t i = 0; i < n;) {
        body.len = 0;
        put_byte(&body, (uint8_t)section);
        for (; i < n && body.len < BATCH_MAX; i++)
            fn(w, i, &body);
        batch(w, NO_THREAD, w->t0, &body);
    }
    pbuf_free(&body);
}

static void string_entry(struct tw *w, size_t i, struct pbuf *b)
{
    put_byte(b, EV_STRING);
    pb_varint(b, i + 1);
    pb_varint(b, w->strs[i].len);
    pbuf_append(b, w->strs[i].s, w->strs[i].len);
}

static void stack_entry(struct tw *w, size_t i, struct pbuf *b)
{
    const struct tw_stack *s = &w->stacks[i];
    put_byte(b, EV_STACK);
    pb_varint(b, i + 1);
    pb_varint(b, s->n);
    for (size_t k = 0; k < s->n; k++) {
        uintptr_t pc = w->frames[s->first + k];
        struct htab_slot *sl = htab_find(&w->pc_index, hash_splitmix64(pc),
                                         pc_eq, w, &pc);
        const struct tw_pc *p = &w->pcs[sl->idx1 - 1];
        pb_varint(b, pc);
        pb_varint(b, p->func);
        pb_varint(b, p->file);
        pb_varint(b, p->line);
    }
}

static void cpu_entry(struct tw *w, size_t i, struct pbuf *b)
{
    const struct tw_cpu *c = &w->cpu[i];
    put_byte(b, EV_CPU_SAMPLE);
    pb_varint(b, (uint64_t)c->t);
    pb_varint(b, c->m);
    pb_varint(b, c->p);
    pb_varint(b, c->g);
    pb_varint(b, c->stack);
}

static void write_sync(struct tw *w)
{
    struct timespec mono, wall;
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t now_mono = (int64_t)mono.tv_sec * 1000000000LL + mono.tv_nsec;
    int64_t at_t0 = (int64_t)wall.tv_sec * 1000000000LL + wall.tv_nsec -
                    (now_mono - w->t0);
    struct pbuf body = {0};
    put_byte(&body, EV_SYNC);
    put_byte(&body, EV_FREQUENCY);
    pb_varint(&body, 1000000000ULL); /* timestamps are nanoseconds */
    put_byte(&body, EV_CLOCK_SNAPSHOT);
    pb_varint(&body, 0);
    pb_varint(&body, (uint64_t)w->t0);
    pb_varint(&body, (uint64_t)(at_t0 / 1000000000LL));
    pb_varint(&body, (uint64_t)(at_t0 % 1000000000LL));
    batch(w, NO_THREAD, w->t0, &body);
    pbuf_free(&body);
}

int tw_finish(struct tw *w, struct pbuf *out)
{
    symbolize(w);
    static const char header[16] = "go 1.26 trace\0\0";
    pbuf_append(&w->out, header, 16);
    write_sync(w);
    write_events(w);
    write_table(w, EV_STRINGS, w->nstrs, string_entry);
    write_table(w, EV_STACKS, w->nstacks, stack_entry);
    if (w->ncpu)
        write_table(w, EV_CPU_SAMPLES, w->ncpu, cpu_entry);
    put_byte(&w->out, EV_END_OF_GENERATION);
    if (w->oom || w->out.oom)
        return -1;
    *out = w->out;
    w->out = (struct pbuf){0};
    return 0;
}

void tw_free(struct tw *w)
{
    for (size_t i = 0; i < w->nstrs; i++)
        real_free(w->strs[i].s);
    real_free(w->strs);
    real_free(w->pcs);
    real_free(w->stacks);
    real_free(w->frames);
    real_free(w->evs);
    real_free(w->cpu);
    real_free(w->thread_ids);
    htab_free(&w->str_index);
    htab_free(&w->pc_index);
    htab_free(&w->stack_index);
    pbuf_free(&w->out);
    memset(w, 0, sizeof *w);
}
