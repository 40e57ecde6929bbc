/*
 * The hash mixers of the agent's tables, one copy each. The tables stay
 * their own (mmap'd or arena memory, spinlocks or lock-free publication,
 * each with its own probe rule); what they share is how a key becomes bits.
 *
 * All are pure arithmetic: async-signal-safe, no allocation.
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

/* The first half of murmur3's 64-bit finaliser: enough to spread a
 * pointer's high bits into the low ones a probe starts from. */
static inline uint64_t hash_murmur_half(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 33);
}

#endif
