/*
 * Custom profiles: the registry of named profiles and the public
 * pprof_agent_profile_* entry points of pprofagent.h (plus
 * pprof_agent_api_version, which tells the header's wrappers that the agent
 * answers).
 *
 * Entered from host threads in normal context, never from a signal handler:
 * adding a key captures the caller's stack with libunwind. Each profile has
 * a stack table (distinct stacks, one counter: keys added there and not yet
 * removed) and a key map (key -> stack entry, open addressing with
 * tombstones) under the profile's spinlock. Memory comes from mmap and the
 * arena, never from the host's allocator; a profile is never freed, so an
 * HTTP worker can read one while host threads change it.
 */
#include "agent/custom/custom.h"

#include "agent/core/arena.h"
#include "agent/stacks/cfi.h"
#include "agent/config.h"
#include "agent/guard.h"
#include "agent/core/hash.h"
#include "agent/spinlock.h"
#include "agent/stacks/stack.h"
#include "agent/stacks/stack_table.h"
#define PPROF_AGENT_BUILD
#include "agent/pprofagent.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define TOMBSTONE ((struct stack_entry *)1)

struct key_slot {
    const void *key;
    struct stack_entry *entry; /* NULL: empty; TOMBSTONE: removed */
};

struct pprof_profile {
    char name[CUSTOM_NAME_MAX + 1];
    struct stack_table *stacks;
    spinlock_t lock;
    struct key_slot *slots; /* nslots, a power of two, from mmap */
    size_t nslots;
    size_t used; /* live keys plus tombstones */
    long keys;   /* live keys (read without the lock) */
};

static spinlock_t registry_lock;
static struct pprof_profile *registry[CUSTOM_MAX_PROFILES];
static size_t registry_n;

size_t custom_profile_count(void)
{
    return __atomic_load_n(&registry_n, __ATOMIC_ACQUIRE);
}

struct pprof_profile *custom_profile_at(size_t i)
{
    return i < custom_profile_count() ? registry[i] : NULL;
}

struct pprof_profile *custom_profile_find(const char *name)
{
    size_t n = custom_profile_count();
    for (size_t i = 0; i < n; i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

const char *custom_profile_name(const struct pprof_profile *p)
{
    return p->name;
}

long custom_profile_keys(const struct pprof_profile *p)
{
    return __atomic_load_n(&p->keys, __ATOMIC_RELAXED);
}

struct stack_table *custom_profile_stacks(const struct pprof_profile *p)
{
    return p->stacks;
}

/* Go's built-in profiles, the endpoints net/http/pprof serves itself and
 * the agent's own (a custom profile of that name could never be served). */
static const char *const reserved[] = {
    "goroutine", "threadcreate", "heap",   "allocs",     "block",     "mutex",
    "profile",   "cmdline",      "symbol", "flamegraph", "processes", "trace",
};

int custom_name_allowed(const char *name)
{
    size_t len = strnlen(name, CUSTOM_NAME_MAX + 1);
    if (len == 0 || len > CUSTOM_NAME_MAX || name[0] == '/' ||
        name[len - 1] == '/')
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
              c == '/' || c == '+'))
            return 0;
    }
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcmp(name, reserved[i]) == 0)
            return 0;
    return 1;
}

/* ---- key map (profile lock held) ----------------------------------------- */

static size_t slot_of(const void *key, size_t nslots)
{
    return hash_fib_slot((uint64_t)(uintptr_t)key, 20, nslots);
}

/* Rebuilds the map with room for twice the live keys (drops tombstones).
 * Returns 0 or -ENOMEM. */
static int rehash(struct pprof_profile *p)
{
    size_t n = 1024;
    while (n < (size_t)p->keys * 4)
        n <<= 1;
    struct key_slot *s = mmap(NULL, n * sizeof *s, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        return -ENOMEM;
    for (size_t i = 0; i < p->nslots; i++) {
        struct key_slot *o = &p->slots[i];
        if (!o->entry || o->entry == TOMBSTONE)
            continue;
        size_t j = slot_of(o->key, n);
        while (s[j].entry)
            j = (j + 1) & (n - 1);
        s[j] = *o;
    }
    if (p->slots)
        munmap(p->slots, p->nslots * sizeof *p->slots);
    p->slots = s;
    p->nslots = n;
    p->used = (size_t)p->keys;
    return 0;
}

/* The slot holding key, or NULL. */
static struct key_slot *find_key(struct pprof_profile *p, const void *key)
{
    if (!p->slots)
        return NULL;
    for (size_t i = slot_of(key, p->nslots);; i = (i + 1) & (p->nslots - 1)) {
        struct key_slot *s = &p->slots[i];
        if (!s->entry)
            return NULL;
        if (s->entry != TOMBSTONE && s->key == key)
            return s;
    }
}

/* ---- public entry points (pprofagent.h) ---------------------------------- */

int pprof_agent_api_version(void)
{
    return opt_enable ? 1 : 0;
}

pprof_profile *pprof_agent_profile_new(const char *name)
{
    if (!opt_enable) {
        errno = ENOSYS;
        return NULL;
    }
    if (!name || !custom_name_allowed(name)) {
        errno = EINVAL;
        return NULL;
    }
    guard_enter();
    struct pprof_profile *p = NULL;
    int err = 0;
    spin_lock(&registry_lock);
    if (custom_profile_find(name))
        err = EEXIST;
    else if (registry_n == CUSTOM_MAX_PROFILES)
        err = ENOSPC;
    else if (!(p = arena_alloc(sizeof *p)) ||
             !(p->stacks = stack_table_create(1, 4096)))
        err = ENOMEM;
    if (err == 0) {
        memcpy(p->name, name, strlen(name) + 1);
        registry[registry_n] = p;
        __atomic_store_n(&registry_n, registry_n + 1, __ATOMIC_RELEASE);
    }
    spin_unlock(&registry_lock);
    /* Its adds capture where the unwind tables cannot be built (inside
     * the host's allocator, perhaps), so no add ever ends their deferral
     * (cfi_tables_defer): without this, a process that serves nothing
     * (PPROF_ADDR=off) or is within its start delay walks every frame
     * through its call-frame information, about 10 times the cost of an
     * add+remove with the tables. */
    if (err == 0 && !agent_tls.in_loader)
        cfi_tables_refresh();
    guard_leave();
    if (err) {
        errno = err;
        return NULL;
    }
    return p;
}

pprof_profile *pprof_agent_profile_lookup(const char *name)
{
    return name ? custom_profile_find(name) : NULL;
}

int pprof_agent_profile_add(pprof_profile *p, const void *key, int skip)
{
    if (!p)
        return -EINVAL;
    if (skip < 0)
        skip = 0;
    guard_enter();
    uintptr_t pcs[STACK_MAX];
    /* The host may call this from inside its own allocator. */
    int n = stack_capture_no_alloc(pcs, STACK_MAX);
    int from = skip < n ? skip : n;
    struct stack_entry *e = NULL;
    if (n - from > 0)
        e = stack_table_get(p->stacks, pcs + from, n - from, 0);
    if (!e) {
        /* No stack, or no room for another one: the key still counts. */
        uintptr_t unknown = FRAME_UNKNOWN;
        e = stack_table_get(p->stacks, &unknown, 1, 0);
    }
    int err = 0;
    spin_lock(&p->lock);
    if (!e) {
        err = -ENOMEM;
    } else if (find_key(p, key)) {
        err = -EEXIST;
    } else if ((p->used + 1) * 4 > p->nslots * 3 && (err = rehash(p)) != 0) {
        /* no room */
    } else {
        size_t i = slot_of(key, p->nslots);
        while (p->slots[i].entry && p->slots[i].entry != TOMBSTONE)
            i = (i + 1) & (p->nslots - 1);
        if (!p->slots[i].entry)
            p->used++;
        p->slots[i].key = key;
        p->slots[i].entry = e;
        stack_entry_add(e, 0, 1);
        __atomic_store_n(&p->keys, p->keys + 1, __ATOMIC_RELAXED);
    }
    spin_unlock(&p->lock);
    guard_leave();
    return err;
}

int pprof_agent_profile_remove(pprof_profile *p, const void *key)
{
    if (!p)
        return -EINVAL;
    int err = 0;
    spin_lock(&p->lock);
    struct key_slot *s = find_key(p, key);
    if (!s) {
        err = -ENOENT;
    } else {
        stack_entry_add(s->entry, 0, -1);
        s->entry = TOMBSTONE;
        __atomic_store_n(&p->keys, p->keys - 1, __ATOMIC_RELAXED);
    }
    spin_unlock(&p->lock);
    return err;
}

long pprof_agent_profile_count(pprof_profile *p)
{
    return p ? custom_profile_keys(p) : 0;
}
