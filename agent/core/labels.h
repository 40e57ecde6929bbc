/*
 * Profiler labels (pprofagent.h's pprof_label_*): per-thread key=value sets
 * that CPU samples, heap samples and the threads profile carry.
 *
 * A label set is immutable and interned (labels.c): each distinct set of
 * pairs exists once, in memory that is never freed, with a small id. A
 * thread's current set is one pointer in initial-exec TLS; setting a label
 * builds (or finds) the set with that pair and swaps the pointer. A signal
 * handler only reads its own thread's pointer and copies the id into its
 * sample, so it never races with the interning table.
 */
#ifndef PPROF_LABELS_H
#define PPROF_LABELS_H

#include <stddef.h>
#include <stdint.h>

#define LABELS_MAX_PAIRS 32
#define LABELS_MAX_SETS 65536
#define LABELS_MAX_LEN 255

struct label_pair {
    const char *key;
    const char *value;
};

/* The public name (pprofagent.h) of an interned set. */
struct pprof_label_set {
    uint32_t id; /* 1..LABELS_MAX_SETS-1; 0 is the empty set (NULL) */
    uint32_t n;  /* pairs, sorted by key, keys distinct */
    uint64_t hash;
    struct pprof_label_set *next; /* interning chain */
    struct label_pair pairs[];
};

/* The calling thread's labels (NULL: none). Written by its own thread in
 * normal context (one pointer store), read by its own signal handlers. */
extern __thread const struct pprof_label_set *labels_current
    __attribute__((tls_model("initial-exec")));

/* The id of the calling thread's labels, 0 when none.
 * Async-signal-safe. Does not allocate. */
static inline uint32_t labels_current_id(void)
{
    const struct pprof_label_set *s = labels_current;
    return s ? s->id : 0;
}

/* The set with this id, NULL for 0 or an unknown id.
 * Async-signal-safe. Does not allocate. */
const struct pprof_label_set *labels_by_id(uint32_t id);

/* Number of distinct label sets interned so far. Async-signal-safe. */
uint32_t labels_set_count(void);

#endif
