/*
 * The stack table: distinct stacks (plus an integer key) with a few atomic
 * counters each. Shared by threadcreate, heap and contention records.
 *
 * Writers are interposed calls on any host thread; readers are the HTTP
 * workers encoding a profile. Lookups are lock-free: a slot is published
 * with a release store after its entry is complete, and entries are never
 * removed or moved. Inserts take the table's spinlock. Memory comes from the
 * arena (mmap), never from the host allocator.
 */
#include "agent/core/arena.h"
#include "agent/core/hash.h"
#include "agent/spinlock.h"
#include "agent/stacks/stack_table.h"
#include "agent/core/real.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct stack_table {
    int nvalues;
    size_t nslots; /* power of two */
    size_t count;
    size_t limit;
    spinlock_t lock;
    struct stack_entry *all;
    struct stack_entry **slots;
};

struct stack_table *stack_table_create(int nvalues, size_t capacity)
{
    size_t nslots = 1024;
    while (nslots < capacity * 2)
        nslots <<= 1;
    struct stack_table *t = arena_alloc(sizeof *t);
    if (!t)
        return NULL;
    t->slots = arena_alloc(nslots * sizeof *t->slots);
    if (!t->slots)
        return NULL;
    t->nvalues = nvalues;
    t->nslots = nslots;
    t->limit = nslots / 2;
    return t;
}

static uint64_t hash_stack(const uintptr_t *pcs, int depth, uint64_t key)
{
    uint64_t h = HASH_GOLDEN ^ key ^ ((uint64_t)depth << 56);
    for (int i = 0; i < depth; i++) {
        h ^= pcs[i];
        h *= 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    return h ? h : 1;
}

static int same(const struct stack_entry *e, uint64_t h, const uintptr_t *pcs,
                int depth, uint64_t key)
{
    return e->hash == h && e->key == key && e->depth == depth &&
           memcmp(e->pcs, pcs, (size_t)depth * sizeof *pcs) == 0;
}

struct stack_entry *stack_table_get(struct stack_table *t,
                                    const uintptr_t *pcs, int depth,
                                    uint64_t key)
{
    if (!t)
        return NULL;
    uint64_t h = hash_stack(pcs, depth, key);
    size_t mask = t->nslots - 1;
    size_t i = h & mask;
    for (;;) {
        struct stack_entry *e =
            __atomic_load_n(&t->slots[i], __ATOMIC_ACQUIRE);
        if (!e)
            break;
        if (same(e, h, pcs, depth, key))
            return e;
        i = (i + 1) & mask;
    }

    spin_lock(&t->lock);
    /* Another thread may have inserted it, or filled our slot, meanwhile. */
    i = h & mask;
    for (;;) {
        struct stack_entry *e = t->slots[i];
        if (!e)
            break;
        if (same(e, h, pcs, depth, key)) {
            spin_unlock(&t->lock);
            return e;
        }
        i = (i + 1) & mask;
    }
    if (t->count >= t->limit) {
        spin_unlock(&t->lock);
        return NULL;
    }
    size_t size = sizeof(struct stack_entry) + (size_t)depth * sizeof *pcs;
    struct stack_entry *e = arena_alloc(size + (size_t)t->nvalues * 8);
    if (!e) {
        spin_unlock(&t->lock);
        return NULL;
    }
    e->hash = h;
    e->key = key;
    e->depth = depth;
    memcpy(e->pcs, pcs, (size_t)depth * sizeof *pcs);
    e->values = (int64_t *)((char *)e + size);
    e->next_all = t->all;
    __atomic_store_n(&t->all, e, __ATOMIC_RELEASE);
    __atomic_store_n(&t->slots[i], e, __ATOMIC_RELEASE);
    __atomic_store_n(&t->count, t->count + 1, __ATOMIC_RELAXED);
    spin_unlock(&t->lock);
    return e;
}

struct stack_entry *stack_table_first(struct stack_table *t)
{
    return t ? __atomic_load_n(&t->all, __ATOMIC_ACQUIRE) : NULL;
}

size_t stack_table_count(struct stack_table *t)
{
    return t ? __atomic_load_n(&t->count, __ATOMIC_RELAXED) : 0;
}

int stack_table_snapshot(struct stack_table *t, struct stack_snapshot *out)
{
    out->entries = NULL;
    out->values = NULL;
    out->n = 0;
    out->nvalues = t ? t->nvalues : 0;
    if (!t)
        return 0;
    /* The list only grows at its head and published entries never change,
     * so the list seen from one head is a fixed snapshot of the table. */
    struct stack_entry *head = stack_table_first(t);
    size_t count = 0;
    for (struct stack_entry *e = head; e; e = e->next_all)
        count++;
    if (count == 0)
        return 0;
    out->entries = real_malloc(count * sizeof *out->entries);
    out->values = real_malloc(count * (size_t)t->nvalues * sizeof *out->values);
    if (!out->entries || !out->values) {
        stack_snapshot_free(out);
        return -ENOMEM;
    }
    size_t n = 0;
    for (struct stack_entry *e = head; e; e = e->next_all) {
        out->entries[n] = e;
        for (int v = 0; v < t->nvalues; v++)
            out->values[n * (size_t)t->nvalues + (size_t)v] =
                stack_entry_value(e, v);
        n++;
    }
    out->n = n;
    return 0;
}

void stack_snapshot_subtract(struct stack_snapshot *later,
                             const struct stack_snapshot *earlier)
{
    /* Both lists are newest first and later is a superset of earlier, so
     * earlier's entries are later's tail, in the same order. */
    size_t skip = later->n >= earlier->n ? later->n - earlier->n : 0;
    for (size_t i = 0; i < earlier->n && skip + i < later->n; i++) {
        if (later->entries[skip + i] != earlier->entries[i])
            continue;
        for (int v = 0; v < later->nvalues; v++)
            later->values[(skip + i) * (size_t)later->nvalues + (size_t)v] -=
                earlier->values[i * (size_t)earlier->nvalues + (size_t)v];
    }
}

void stack_snapshot_free(struct stack_snapshot *s)
{
    real_free(s->entries);
    real_free(s->values);
    s->entries = NULL;
    s->values = NULL;
    s->n = 0;
}
