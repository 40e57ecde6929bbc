/*
 * Label sets: interning, the per-thread current set, and the public
 * pprof_agent_label_* / pprof_agent_labels_* entry points of pprofagent.h.
 *
 * Entered from host threads in normal context (set, clear: they take the
 * interning spinlock and may map memory) and from signal handlers
 * (labels_by_id, and save/restore when the host calls them there: lock-free
 * reads only). Sets and their strings live in the arena and are never
 * freed, so a pointer or id handed out stays valid for the life of the
 * process; the id table is written once per id, before the id is
 * published with a release store of `nsets`.
 */
#include "agent/core/labels.h"

#include "agent/core/arena.h"
#include "agent/compiler.h"
#include "agent/guard.h"
#include "agent/spinlock.h"
#define PPROF_AGENT_BUILD
#include "agent/pprofagent.h"

#include <errno.h>
#include <string.h>

__thread const struct pprof_label_set *labels_current
    __attribute__((tls_model("initial-exec")));

#define CHAINS 4096 /* power of two */

static spinlock_t intern_lock;
static struct pprof_label_set *chains[CHAINS];
static const struct pprof_label_set **by_id; /* LABELS_MAX_SETS entries */
static uint32_t nsets = 1;                   /* next id; 0 is the empty set */

const struct pprof_label_set *labels_by_id(uint32_t id)
{
    if (id == 0 || id >= __atomic_load_n(&nsets, __ATOMIC_ACQUIRE))
        return NULL;
    return __atomic_load_n(&by_id[id], __ATOMIC_ACQUIRE);
}

uint32_t labels_set_count(void)
{
    return __atomic_load_n(&nsets, __ATOMIC_ACQUIRE) - 1;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    h ^= 0xff; /* separator */
    return h * 0x100000001b3ULL;
}

static uint64_t hash_pairs(const struct label_pair *p, uint32_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint32_t i = 0; i < n; i++)
        h = hash_str(hash_str(h, p[i].key), p[i].value);
    return h;
}

static int same_pairs(const struct pprof_label_set *s,
                      const struct label_pair *p, uint32_t n)
{
    if (s->n != n)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(s->pairs[i].key, p[i].key) != 0 ||
            strcmp(s->pairs[i].value, p[i].value) != 0)
            return 0;
    return 1;
}

static char *copy_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *c = arena_alloc(n);
    if (c)
        memcpy(c, s, n);
    return c;
}

/* The interned set of these pairs (sorted, distinct keys). Returns 0 and
 * *out (NULL for no pairs), or -ENOSPC / -ENOMEM. */
static int intern(const struct label_pair *p, uint32_t n,
                  const struct pprof_label_set **out)
{
    if (n == 0) {
        *out = NULL;
        return 0;
    }
    uint64_t h = hash_pairs(p, n);
    int err = 0;
    spin_lock(&intern_lock);
    struct pprof_label_set *s;
    for (s = chains[h & (CHAINS - 1)]; s; s = s->next)
        if (s->hash == h && same_pairs(s, p, n))
            goto done;
    if (!by_id) {
        by_id = arena_alloc(LABELS_MAX_SETS * sizeof *by_id);
        if (!by_id) {
            err = -ENOMEM;
            goto done;
        }
    }
    if (nsets >= LABELS_MAX_SETS) {
        err = -ENOSPC;
        goto done;
    }
    s = arena_alloc(sizeof *s + n * sizeof s->pairs[0]);
    if (!s) {
        err = -ENOMEM;
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) {
        s->pairs[i].key = copy_str(p[i].key);
        s->pairs[i].value = copy_str(p[i].value);
        if (!s->pairs[i].key || !s->pairs[i].value) {
            err = -ENOMEM; /* the partial set is left in the arena */
            s = NULL;
            goto done;
        }
    }
    s->n = n;
    s->hash = h;
    s->id = nsets;
    s->next = chains[h & (CHAINS - 1)];
    chains[h & (CHAINS - 1)] = s;
    __atomic_store_n(&by_id[s->id], s, __ATOMIC_RELEASE);
    __atomic_store_n(&nsets, nsets + 1, __ATOMIC_RELEASE);
done:
    spin_unlock(&intern_lock);
    if (err == 0)
        *out = s;
    return err;
}

static int valid_str(const char *s)
{
    if (!s || !s[0])
        return 0;
    return strnlen(s, LABELS_MAX_LEN + 1) <= LABELS_MAX_LEN;
}

/* Current set with key set to value (value NULL: key removed). */
static int change(const char *key, const char *value)
{
    if (!valid_str(key) || (value && !valid_str(value)))
        return -EINVAL;
    const struct pprof_label_set *cur = labels_current;
    struct label_pair pairs[LABELS_MAX_PAIRS];
    uint32_t n = 0;
    int placed = value == NULL;
    for (uint32_t i = 0; cur && i < cur->n; i++) {
        int c = strcmp(cur->pairs[i].key, key);
        if (c == 0) {
            if (value)
                pairs[n++] = (struct label_pair){key, value};
            placed = 1;
            continue;
        }
        if (c > 0 && !placed) {
            pairs[n++] = (struct label_pair){key, value};
            placed = 1;
        }
        if (n == LABELS_MAX_PAIRS)
            return -E2BIG;
        pairs[n++] = cur->pairs[i];
    }
    if (!placed) {
        if (n == LABELS_MAX_PAIRS)
            return -E2BIG;
        pairs[n++] = (struct label_pair){key, value};
    }
    const struct pprof_label_set *s;
    guard_enter();
    int err = intern(pairs, n, &s);
    guard_leave();
    if (err == 0)
        labels_current = s;
    return err;
}

/* ---- public entry points (pprofagent.h) ---------------------------------- */

int pprof_agent_label_set(const char *key, const char *value)
{
    if (!value)
        return -EINVAL;
    return change(key, value);
}

int pprof_agent_label_clear(const char *key)
{
    return change(key, NULL);
}

PPROF_SIGNAL_SAFE pprof_labels pprof_agent_labels_save(void)
{
    return labels_current;
}

PPROF_SIGNAL_SAFE void pprof_agent_labels_restore(pprof_labels labels)
{
    /* Only a set we handed out is accepted: anything else clears. */
    if (labels && labels_by_id(labels->id) != labels)
        labels = NULL;
    labels_current = labels;
}
