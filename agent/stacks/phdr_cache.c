/*
 * A snapshot of the loaded objects' program headers, so that the CPU
 * signal handler can let libunwind call dl_iterate_phdr without taking the
 * loader lock (glibc's dl_iterate_phdr locks it; a thread interrupted while
 * holding it would deadlock in its own handler).
 *
 * Writers (refresh, dlclose) run in normal context on any thread; they are
 * serialized by a spinlock and keep readers out with the busy/readers
 * protocol: raise cpu_phdr_busy, wait until cpu_phdr_readers is 0, change
 * the snapshot, lower busy. Readers are signal handlers only (they register
 * in cpu_phdr_readers, then check busy: both seq_cst, so one side always
 * sees the other). Memory: mmap'd arrays, grown by writers only.
 *
 * Not every unload goes through the dlclose the busy protocol covers: the
 * C library unloads its own modules (iconv's gconv modules, NSS) with an
 * internal dlclose. Until the next refresh the snapshot then lists an
 * object that is gone, and a lookup that walks the list past it read its
 * unmapped program headers (a crash in the handler, seen with iconv and a
 * thread running code outside any object). So the program headers are
 * copied into the snapshot, and where the C library has _dl_find_object
 * (glibc 2.35, lock-free and async-signal-safe) each entry is checked to be
 * still loaded before it is handed on. An object unloaded between that
 * check and libunwind's read of its unwind tables is the window left.
 */
#include "agent/stacks/phdr_cache.h"
#include "agent/fork_step.h"

#include "agent/stacks/cfi.h"
#include "agent/compiler.h"
#include "agent/cpu/cpu.h"
#include "agent/guard.h"
#include "agent/core/loader.h"
#include "agent/stacks/objects.h"
#include "agent/spinlock.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#define NAME_BYTES 256
#define PHDRS_MAX 24 /* typical objects have 8 to 14 */

struct cached {
    struct dl_phdr_info info;
    char name[NAME_BYTES];
    ElfW(Phdr) phdr[PHDRS_MAX]; /* info.dlpi_phdr points here if it fits */
    /* The object's identity for _dl_find_object: an address inside it and
     * what the C library answered for it when the snapshot was taken. */
    void *probe;
    void *map_start, *map_end;
    struct link_map *map;
};

int (*agent_find_object)(void *addr, struct dl_find_object *out);

int cpu_phdr_readers;
int cpu_phdr_busy;

static spinlock_t writer_lock;
static struct cached *cache;
static size_t cache_cap;
static size_t cache_n;
static unsigned long long seen_adds = ~0ULL, seen_subs = ~0ULL;


static void wait_for_readers(void)
{
    while (__atomic_load_n(&cpu_phdr_readers, __ATOMIC_SEQ_CST) != 0)
        sched_yield();
}

struct build {
    struct cached *to;
    size_t cap;
    size_t n;
    size_t needed;
};

static int copy_one(struct dl_phdr_info *info, size_t size, void *data)
{
    struct build *b = data;
    b->needed++;
    if (b->n >= b->cap)
        return 0;
    struct cached *c = &b->to[b->n++];
    memset(c, 0, sizeof *c);
    memcpy(&c->info, info, size < sizeof c->info ? size : sizeof c->info);
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    size_t len = strlen(name);
    if (len >= NAME_BYTES)
        len = NAME_BYTES - 1;
    memcpy(c->name, name, len);
    c->name[len] = '\0';
    c->info.dlpi_name = c->name;
    if (info->dlpi_phnum <= PHDRS_MAX) {
        memcpy(c->phdr, info->dlpi_phdr,
               info->dlpi_phnum * sizeof info->dlpi_phdr[0]);
        c->info.dlpi_phdr = c->phdr;
    }
    uintptr_t lo, hi;
    phdr_load_range(info, &lo, &hi);
    struct dl_find_object found;
    if (agent_find_object && lo < hi &&
        agent_find_object((void *)lo, &found) == 0) {
        c->probe = (void *)lo;
        c->map_start = found.dlfo_map_start;
        c->map_end = found.dlfo_map_end;
        c->map = found.dlfo_link_map;
    }
    return 0;
}

/* 1 when the object c describes is still loaded, as far as the C library
 * can tell without a lock. Async-signal-safe. */
static PPROF_SIGNAL_SAFE int still_loaded(const struct cached *c)
{
    if (!c->probe)
        return 1; /* nothing to check it with */
    struct dl_find_object now;
    return agent_find_object(c->probe, &now) == 0 &&
           now.dlfo_map_start == c->map_start &&
           now.dlfo_map_end == c->map_end && now.dlfo_link_map == c->map;
}

/* Rebuilds in place; the caller holds writer_lock and has busy raised with
 * no readers left. */
static int rebuild(void)
{
    if (!real_dl_iterate_phdr)
        return -ENOSYS;
    for (int attempt = 0; attempt < 4; attempt++) {
        struct build b = {cache, cache_cap, 0, 0};
        loader_iterate_phdr(copy_one, &b);
        if (b.needed <= cache_cap) {
            cache_n = b.n;
            return 0;
        }
        size_t cap = b.needed * 2 + 16;
        void *p = mmap(NULL, cap * sizeof *cache, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -ENOMEM;
        if (cache)
            munmap(cache, cache_cap * sizeof *cache);
        cache = p;
        cache_cap = cap;
        cache_n = 0;
    }
    return -EAGAIN;
}

int phdr_cache_refresh(int force)
{
    unsigned long long v[2] = {0, 0};
    if (!real_dl_iterate_phdr)
        return -ENOSYS;
    loader_iterate_phdr(cfi_phdr_counters, v);
    if (!force && v[0] == seen_adds && v[1] == seen_subs)
        return 0;
    spin_lock(&writer_lock);
    agent_tls.phdr_busy++;
    __atomic_fetch_add(&cpu_phdr_busy, 1, __ATOMIC_SEQ_CST);
    wait_for_readers();
    int err = rebuild();
    __atomic_fetch_sub(&cpu_phdr_busy, 1, __ATOMIC_SEQ_CST);
    agent_tls.phdr_busy--;
    if (err == 0) {
        /* A move of the loader's counts (not a forced rebuild): objects
         * came or went. */
        if (v[0] != seen_adds || v[1] != seen_subs)
            objects_changed();
        seen_adds = v[0];
        seen_subs = v[1];
    }
    spin_unlock(&writer_lock);
    return err ? err : 1;
}

PPROF_SIGNAL_SAFE int
phdr_cache_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *),
                   void *data)
{
    int ret = 0;
    for (size_t i = 0; i < cache_n; i++) {
        if (!still_loaded(&cache[i]))
            continue;
        ret = cb(&cache[i].info, sizeof cache[i].info, data);
        if (ret != 0)
            break;
    }
    return ret;
}

void phdr_unload_enter(void)
{
    agent_tls.phdr_busy++;
    __atomic_fetch_add(&cpu_phdr_busy, 1, __ATOMIC_SEQ_CST);
    wait_for_readers();
}

void phdr_unload_leave(void)
{
    /* Only a running profile needs the snapshot to be current; otherwise
     * the next profile's start rebuilds it. */
    if (__atomic_load_n(&cpu_active, __ATOMIC_SEQ_CST)) {
        spin_lock(&writer_lock);
        rebuild();
        spin_unlock(&writer_lock);
    } else {
        seen_adds = seen_subs = ~0ULL;
    }
    __atomic_fetch_sub(&cpu_phdr_busy, 1, __ATOMIC_SEQ_CST);
    agent_tls.phdr_busy--;
}

FORK_PATH void phdr_cache_fork_child(void)
{
    /* Handlers of the parent's other threads that were reading, and their
     * writers, did not come along: only this thread's own share stays. The
     * snapshot may be half rebuilt, so the next refresh (every profile and
     * dump starts with one) rebuilds it. */
    FORK_SET_ATOMIC(cpu_phdr_readers, 0);
    FORK_SET_ATOMIC(cpu_phdr_busy, agent_tls.phdr_busy);
    FORK_SET(seen_adds, ~0ULL);
    FORK_SET(seen_subs, ~0ULL);
}
