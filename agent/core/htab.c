/*
 * The one growable hash index: open addressing with linear probing over
 * indexes into the caller's own array (its entries stay in insertion
 * order, so nothing a profile writes depends on the hash). A slot keeps
 * the full hash, so growing never reads the keys, and index + 1, so that
 * zero marks an empty slot. Used by the profile builder (strings,
 * functions, locations), the CPU sample aggregate, the flame graph's tree
 * and the symbolizer's name cache; and the group table over it (the CPU
 * and wall aggregates). Runs on the agent's server threads; plain
 * malloc.
 */
#include "agent/core/hash.h"
#include "agent/core/real.h"

#include "agent/core/array.h"

#include <stdlib.h>
#include <string.h>

uint64_t htab_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    /* FNV-1a over the bytes, finished with the mixer for the low bits a
     * table masks. */
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return hash_splitmix64(h);
}

static int grow(struct htab *t)
{
    size_t ncap = t->cap ? t->cap * 2 : 64;
    struct htab_slot *ns = real_calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slots[i].idx1)
            continue;
        size_t j = t->slots[i].hash & (ncap - 1);
        while (ns[j].idx1)
            j = (j + 1) & (ncap - 1);
        ns[j] = t->slots[i];
    }
    real_free(t->slots);
    t->slots = ns;
    t->cap = ncap;
    return 0;
}

struct htab_slot *htab_find(const struct htab *t, uint64_t hash,
                            htab_eq_fn eq, const void *ctx, const void *key)
{
    if (!t->cap)
        return NULL;
    size_t i = hash & (t->cap - 1);
    while (t->slots[i].idx1) {
        if (t->slots[i].hash == hash && eq(ctx, t->slots[i].idx1 - 1, key))
            return &t->slots[i];
        i = (i + 1) & (t->cap - 1);
    }
    return &t->slots[i];
}

struct htab_slot *htab_find_for_insert(struct htab *t, uint64_t hash,
                                       htab_eq_fn eq, const void *ctx,
                                       const void *key)
{
    if ((t->count + 1) * 2 > t->cap && grow(t) != 0)
        return NULL;
    return htab_find(t, hash, eq, ctx, key);
}

size_t htab_lookup(struct htab *t, uint64_t hash, htab_eq_fn eq,
                   const void *ctx, const void *key, struct htab_slot **slot,
                   int *oom)
{
    *slot = htab_find_for_insert(t, hash, eq, ctx, key);
    if (!*slot) {
        *oom = 1;
        return 0;
    }
    return (*slot)->idx1;
}

void htab_set(struct htab *t, struct htab_slot *s, uint64_t hash, size_t idx)
{
    s->hash = hash;
    s->idx1 = idx + 1;
    t->count++;
}

void htab_free(struct htab *t)
{
    real_free(t->slots);
    *t = (struct htab){0};
}

void *group_find_or_add(struct group_table *t, uint64_t hash, htab_eq_fn eq,
                        const void *key, int *added)
{
    *added = 0;
    struct htab_slot *s = htab_find_for_insert(&t->index, hash, eq, t, key);
    if (!s)
        return NULL;
    if (s->idx1)
        return group_at(t, s->idx1 - 1);
    if (array_reserve(&t->v, &t->cap, t->n + 1, t->size, 256) != 0)
        return NULL;
    void *e = group_at(t, t->n);
    memset(e, 0, t->size);
    htab_set(&t->index, s, hash, t->n++);
    *added = 1;
    return e;
}

void group_table_free(struct group_table *t)
{
    real_free(t->v);
    htab_free(&t->index);
    t->v = NULL;
    t->n = t->cap = 0;
}

void *group_owner_new(size_t owner_size, size_t entry_size)
{
    struct group_table *t = real_calloc(1, owner_size);
    if (t)
        t->size = entry_size;
    return t;
}

void group_owner_free(void *owner)
{
    if (owner)
        group_table_free(owner);
    real_free(owner);
}
