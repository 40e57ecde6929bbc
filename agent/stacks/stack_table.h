/* The stack table (stacks/stack_table.c). */

#ifndef PPROF_AGENT_STACK_TABLE_H
#define PPROF_AGENT_STACK_TABLE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Interns stacks (plus an optional integer key, such as an allocation size)
 * and keeps nvalues int64 counters per distinct entry. Memory comes from
 * mmap, never from the host allocator; entries are never removed, so a
 * profile can read them while threads keep adding.
 */
struct stack_table;

struct stack_entry {
    struct stack_entry *next_all; /* list of every entry, newest first */
    uint64_t hash;
    uint64_t key;
    int depth;
    int64_t *values;    /* nvalues counters, updated with atomics */
    uintptr_t pcs[];    /* depth entries, leaf first */
};

/* Creates a table with nvalues counters per entry and room for about
 * capacity entries. NULL on failure. Not async-signal-safe. */
struct stack_table *stack_table_create(int nvalues, size_t capacity);
/* Returns the entry for (pcs, key), adding it if new; NULL when the table is
 * full (the caller counts a loss). Thread-safe; takes a spinlock only to
 * insert. Not async-signal-safe. Does not allocate. */
struct stack_entry *stack_table_get(struct stack_table *t,
                                    const uintptr_t *pcs, int depth,
                                    uint64_t key);
/* First entry of the list of all entries (read with acquire). */
struct stack_entry *stack_table_first(struct stack_table *t);
/* Number of entries. */
size_t stack_table_count(struct stack_table *t);
/* Adds v to counter i of e atomically. Async-signal-safe. */
static inline void stack_entry_add(struct stack_entry *e, int i, int64_t v)
{
    __atomic_fetch_add(&e->values[i], v, __ATOMIC_RELAXED);
}
static inline int64_t stack_entry_value(const struct stack_entry *e, int i)
{
    return __atomic_load_n(&e->values[i], __ATOMIC_RELAXED);
}

/*
 * A copy of a table's counters at one moment, for encoding and for deltas
 * (?seconds=N). Entries are never removed from a table, so an entry pointer
 * identifies the same stack in two snapshots. Memory from malloc (taken on
 * the agent's threads only).
 */
struct stack_snapshot {
    struct stack_entry **entries;
    int64_t *values; /* n * nvalues */
    size_t n;
    int nvalues;
};
/* Copies every entry's counters. Returns 0 or -ENOMEM.
 * Not async-signal-safe. */
int stack_table_snapshot(struct stack_table *t, struct stack_snapshot *out);
/* Subtracts earlier from later, entry by entry (entries new in later keep
 * their values). Not async-signal-safe. */
void stack_snapshot_subtract(struct stack_snapshot *later,
                             const struct stack_snapshot *earlier);
/* Frees a snapshot. Not async-signal-safe. */
void stack_snapshot_free(struct stack_snapshot *s);

#endif
