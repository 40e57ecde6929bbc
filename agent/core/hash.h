/*
 * The hash mixers of the agent's tables, one copy each, and the one
 * growable hash index (core/htab.c) of the code that may allocate. The
 * tables that signal handlers and interposers touch stay their own (mmap'd
 * or arena memory, spinlocks or lock-free publication, each with its own
 * probe rule); what they share is how a key becomes bits.
 *
 * The mixers are pure arithmetic: async-signal-safe, no allocation.
 */
#ifndef PPROF_HASH_H
#define PPROF_HASH_H

#include <stddef.h>
#include <stdint.h>

/* 2^64 / the golden ratio: Fibonacci hashing's multiplier, and splitmix64's
 * increment. */
#define HASH_GOLDEN 0x9e3779b97f4a7c15ULL

/* Fibonacci hashing: key times HASH_GOLDEN, the bits from `shift` up, as a
 * slot among cap (a power of two). Spreads pointers and addresses, whose
 * low bits are alike, over the table. */
static inline size_t hash_fib_slot(uint64_t key, unsigned shift, size_t cap)
{
    return (size_t)((key * HASH_GOLDEN) >> shift) & (cap - 1);
}

/* Knuth's 32-bit multiplicative hash, for small integer keys (thread ids)
 * probed from the low bits. */
static inline unsigned hash_knuth32(unsigned key)
{
    return key * 2654435761u;
}

/* splitmix64's finaliser: every output bit depends on every input bit. */
static inline uint64_t hash_splitmix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The agent's random numbers, one generator for every sampling decision:
 * xorshift64* on a 64-bit state of the caller's (a thread's, a session's),
 * which must not be 0: start it with rand_seed(). */
static inline uint64_t rand_next(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dULL;
}

/* A state for rand_next() from any salt (a clock reading mixed with an
 * address): splitmix64, so that nearby salts start far apart; never 0. */
static inline uint64_t rand_seed(uint64_t salt)
{
    uint64_t z = hash_splitmix64(salt + HASH_GOLDEN);
    return z ? z : 0x853c49e6748fea9bULL;
}

/* The first half of murmur3's 64-bit finaliser: enough to spread a
 * pointer's high bits into the low ones a probe starts from. */
static inline uint64_t hash_murmur_half(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

/* ---- hash index (core/htab.c) ------------------------------------------- */

/* The one growable hash index of the agent's non-signal code: the profile
 * builder (strings, functions, locations), the CPU sample aggregate, the
 * flame graph's tree and the symbolizer's name cache. Plain malloc. */

/* An index of entries of the caller's array: the entry's full hash and its
 * index + 1 (0: an empty slot). */
struct htab_slot {
    uint64_t hash;
    size_t idx1;
};
struct htab {
    struct htab_slot *slots;
    size_t cap; /* a power of two, or 0 before the first insert */
    size_t count;
};
/* 1 when entry idx of the caller's array (ctx) equals key. */
typedef int (*htab_eq_fn)(const void *ctx, size_t idx, const void *key);

/* FNV-1a of n bytes from seed, then hash_splitmix64. Async-signal-safe.
 * Does not allocate. */
uint64_t htab_hash_bytes(const void *p, size_t n, uint64_t seed);
/* The slot of the entry equal to key, or the empty slot where it belongs;
 * NULL only when the index is still unallocated. Not async-signal-safe. */
struct htab_slot *htab_find(const struct htab *t, uint64_t hash,
                            htab_eq_fn eq, const void *ctx, const void *key);
/* As htab_find, after making sure one more entry fits (load at most 1/2).
 * NULL when out of memory. Not async-signal-safe. */
struct htab_slot *htab_find_for_insert(struct htab *t, uint64_t hash,
                                       htab_eq_fn eq, const void *ctx,
                                       const void *key);
/* The index + 1 of the entry equal to key, or 0 with *slot the empty slot
 * where it belongs (htab_find_for_insert); when out of memory *slot is
 * NULL and *oom is set to 1. Not async-signal-safe. */
size_t htab_lookup(struct htab *t, uint64_t hash, htab_eq_fn eq,
                   const void *ctx, const void *key, struct htab_slot **slot,
                   int *oom);
/* Fills an empty slot from htab_find*() with entry idx. Not
 * async-signal-safe. Does not allocate. */
void htab_set(struct htab *t, struct htab_slot *s, uint64_t hash, size_t idx);
/* Frees the slots and empties the index. Not async-signal-safe. */
void htab_free(struct htab *t);

/* Groups: entries of `size` bytes kept in the order first added, found
 * through their own index (the CPU profile's and the wall profile's
 * aggregates). Start from {.size = sizeof entry}. */
struct group_table {
    void *v;
    size_t n, cap, size;
    struct htab index;
};
/* Entry idx of t. */
static inline void *group_at(const struct group_table *t, size_t idx)
{
    return (char *)t->v + idx * t->size;
}
/* The entry equal to key (eq is called with t as its ctx), or a new one,
 * zeroed, appended (*added set to 1); NULL when out of memory. Not
 * async-signal-safe. */
void *group_find_or_add(struct group_table *t, uint64_t hash, htab_eq_fn eq,
                        const void *key, int *added);
/* Frees the entries and the index; t is empty again. */
void group_table_free(struct group_table *t);
/* A struct of owner_size bytes, zeroed, whose first member is a struct
 * group_table of entries of entry_size bytes (the CPU and wall
 * aggregates); NULL when out of memory. Not async-signal-safe. */
void *group_owner_new(size_t owner_size, size_t entry_size);
/* Frees such a struct and its table; NULL is ignored. */
void group_owner_free(void *owner);

#endif
