/*
 * The unwind tables of every loaded object, compiled by cfi_parse.c and
 * published for the walker (cfi_walk.c).
 *
 * Writers run in normal context on any thread (the constructor, dlclose,
 * the CPU profile's start and drain and the thread dump on the agent's
 * own threads, a capture outside locks after a walk met code without a
 * table); one at a time: a writer that finds another at work leaves the
 * refresh to a later one rather than wait (it may hold the loader lock the
 * other waits for). Each object is compiled inside the C library's
 * dl_iterate_phdr callback, so it cannot be unloaded while it is read (its
 * file is opened and mapped there too, once, for a .debug_frame section).
 * Readers are walks, in any context including
 * signal handlers: they never wait for a writer. Publication is one
 * pointer swap; an old set (and the rows of objects gone) is unmapped only
 * after two flips of an epoch, each waiting until no walk that could have
 * loaded the old pointer is still inside (the walker's side is in
 * cfi_walk.c). A writer's wait is bounded by the length of a walk, which
 * never blocks.
 *
 * Every table lives in memory this file maps itself; nothing goes through
 * the host's allocator.
 */
#include "agent/stacks/cfi.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/log.h"
#include "agent/core/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct cfi_set *cfi_current;
unsigned cfi_epoch;
int cfi_readers[2];
int cfi_tables_stale;

/* What the writer knows of each object beyond what walks need. */
struct owned {
    uintptr_t lo, hi, base, hdr;
    uint64_t name_hash;
    struct cfi_row *rows;
    uint32_t *index;
    uint64_t *cache;
    size_t map_bytes, index_bytes, cache_bytes;
    uint32_t nrows, cache_mask;
};

static int writer_lock; /* 1 while a writer runs */
static const uint64_t empty_cache[1];
static struct owned *owned;   /* the published set's objects, same order */
static size_t owned_n, owned_map_bytes;
static unsigned long long seen_adds = ~0ULL, seen_subs = ~0ULL;

static size_t page_round(size_t n)
{
    return (n + 4095) & ~(size_t)4095;
}

static void *map(size_t bytes)
{
    void *p = mmap(NULL, page_round(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void unmap(void *p, size_t bytes)
{
    munmap(p, page_round(bytes));
}

static int grow(struct cfi_out *out, size_t need)
{
    size_t cap = out->cap ? out->cap * 2 : 4096;
    while (cap < need)
        cap *= 2;
    void *p;
    if (out->rows)
        p = mremap(out->rows, page_round(out->cap * sizeof *out->rows),
                   page_round(cap * sizeof *out->rows), MREMAP_MAYMOVE);
    else
        p = mmap(NULL, page_round(cap * sizeof *out->rows),
                 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    out->rows = p;
    out->cap = cap;
    return 0;
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

struct found {
    struct owned *to;
    size_t n, cap, needed;
};

static void compile_object(struct owned *o, const char *name);
static int same_object(const struct owned *a, const struct owned *b);

static int collect(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct found *f = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0, hdr = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            if (start < lo)
                lo = start;
            if (start + ph->p_memsz > hi)
                hi = start + ph->p_memsz;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            hdr = start;
        }
    }
    if (lo >= hi)
        return 0;
    f->needed++;
    if (f->n == f->cap)
        return 0;
    struct owned *o = &f->to[f->n++];
    memset(o, 0, sizeof *o);
    o->lo = lo;
    o->hi = hi;
    o->base = info->dlpi_addr;
    o->hdr = hdr;
    o->name_hash = hash_name(info->dlpi_name);
    /* Compiled here, with the loader lock held: the object cannot be
     * unloaded while its sections are read. Objects already compiled
     * keep their rows. */
    for (size_t j = 0; j < owned_n; j++) {
        if (same_object(&owned[j], o)) {
            o->rows = owned[j].rows;
            o->nrows = owned[j].nrows;
            o->map_bytes = owned[j].map_bytes;
            o->index = owned[j].index;
            o->index_bytes = owned[j].index_bytes;
            o->cache = owned[j].cache;
            o->cache_bytes = owned[j].cache_bytes;
            o->cache_mask = owned[j].cache_mask;
            return 0;
        }
    }
    compile_object(o, info->dlpi_name);
    return 0;
}

/* Waits until no walk can still use a set that was current before the
 * last pointer swap. */
static void synchronize(void)
{
    for (int flip = 0; flip < 2; flip++) {
        unsigned old = __atomic_fetch_add(&cfi_epoch, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&cfi_readers[old & 1], __ATOMIC_SEQ_CST) > 0)
            sched_yield();
    }
}

static int same_object(const struct owned *a, const struct owned *b)
{
    return a->lo == b->lo && a->hi == b->hi && a->base == b->base &&
           a->hdr == b->hdr && a->name_hash == b->name_hash;
}

/* 1 when the ELF file mapped at m (bytes long) has its executable
 * segments over [lo, hi) (link-time addresses): the file is the object
 * loaded, not one put in its place since. */
static int same_code(const uint8_t *m, size_t bytes, uintptr_t lo,
                     uintptr_t hi)
{
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)m;
    if (eh->e_phentsize != sizeof(ElfW(Phdr)) || eh->e_phoff > bytes ||
        eh->e_phnum > (bytes - eh->e_phoff) / sizeof(ElfW(Phdr)))
        return 0;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(m + eh->e_phoff);
    uintptr_t flo = UINTPTR_MAX, fhi = 0;
    for (size_t i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
            continue;
        if (ph[i].p_vaddr < flo)
            flo = ph[i].p_vaddr;
        if (ph[i].p_vaddr + ph[i].p_memsz > fhi)
            fhi = ph[i].p_vaddr + ph[i].p_memsz;
    }
    return flo == lo && fhi == hi;
}

/*
 * The .debug_frame section of the file the object named name (the main
 * program: "") was loaded from, mapped read-only (*map, *map_bytes; to
 * unmap), or NULL: no such file (the vDSO), a file whose code is not the
 * object's [lo, hi) (link-time addresses), no such section, or one
 * compressed (SHF_COMPRESSED is left: inflating needs an allocator). A
 * relative name is taken from the current directory, as the loader did
 * (the code check catches a directory changed since).
 */
static const uint8_t *map_debug_frame(const char *name, uintptr_t lo,
                                      uintptr_t hi, size_t *size,
                                      void **map, size_t *map_bytes)
{
    char exe[4096];
    if (!name || !*name) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return NULL;
        exe[n] = 0;
        name = exe;
    }
    if (!strchr(name, '/'))
        return NULL;
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size < sizeof(ElfW(Ehdr))) {
        close(fd);
        return NULL;
    }
    size_t bytes = (size_t)st.st_size;
    const uint8_t *m = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return NULL;
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)m;
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(m + eh->e_shoff);
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || !same_code(m, bytes, lo, hi) ||
        eh->e_shentsize != sizeof(ElfW(Shdr)) || eh->e_shoff > bytes ||
        eh->e_shnum > (bytes - eh->e_shoff) / sizeof(ElfW(Shdr)) ||
        eh->e_shstrndx >= eh->e_shnum ||
        sh[eh->e_shstrndx].sh_offset > bytes ||
        sh[eh->e_shstrndx].sh_size > bytes - sh[eh->e_shstrndx].sh_offset)
        goto none;
    const char *names = (const char *)m + sh[eh->e_shstrndx].sh_offset;
    size_t names_size = sh[eh->e_shstrndx].sh_size;
    static const char want[] = ".debug_frame";
    for (size_t i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_name >= names_size ||
            names_size - sh[i].sh_name < sizeof want ||
            memcmp(names + sh[i].sh_name, want, sizeof want) != 0)
            continue;
        if (sh[i].sh_type != SHT_PROGBITS || (sh[i].sh_flags & SHF_COMPRESSED) ||
            sh[i].sh_offset > bytes || sh[i].sh_size > bytes - sh[i].sh_offset ||
            sh[i].sh_size == 0)
            break;
        *size = sh[i].sh_size;
        *map = (void *)m;
        *map_bytes = bytes;
        return m + sh[i].sh_offset;
    }
none:
    munmap((void *)m, bytes);
    return NULL;
}

/* Compiles o's rows (o->rows stays NULL when it has none usable), from
 * its .eh_frame and, for code that has no description there, from the
 * .debug_frame of its file (name, as the loader knows it). */
static void compile_object(struct owned *o, const char *name)
{
    if (o->hi - o->base > UINT32_MAX || o->lo < o->base)
        return;
    size_t dbg_size = 0, dbg_map_bytes = 0;
    void *dbg_map = NULL;
    const uint8_t *dbg = map_debug_frame(name, o->lo - o->base,
                                         o->hi - o->base, &dbg_size,
                                         &dbg_map, &dbg_map_bytes);
    if (!o->hdr && !dbg)
        return;
    struct cfi_out out = {NULL, 0, 0, grow, map, unmap};
    int parsed = cfi_parse_tables((const uint8_t *)o->hdr, dbg, dbg_size,
                                  o->base, o->lo, o->hi, &out);
    if (dbg_map)
        munmap(dbg_map, dbg_map_bytes);
    if (parsed != 0 || out.n == 0) {
        if (out.rows)
            munmap(out.rows, page_round(out.cap * sizeof *out.rows));
        return;
    }
    size_t nb = ((o->hi - o->lo) >> CFI_BUCKET_SHIFT) + 2;
    uint32_t *index = map(nb * sizeof *index);
    if (!index) {
        munmap(out.rows, page_round(out.cap * sizeof *out.rows));
        return;
    }
    /* The row in force at each bucket's first address. */
    size_t r = 0;
    for (size_t b = 0; b < nb; b++) {
        uintptr_t off = o->lo - o->base + (b << CFI_BUCKET_SHIFT);
        while (r + 1 < out.n && out.rows[r + 1].start <= off)
            r++;
        index[b] = (uint32_t)r;
    }
    /* The row cache: about one entry for every 8 rows, a power of two
     * within [CFI_CACHE_MIN, CFI_CACHE_MAX]. Zeroed by mmap: every entry
     * empty. Without it the object gets no table (walks never check for
     * a missing cache). */
    size_t entries = CFI_CACHE_MIN;
    while (entries < CFI_CACHE_MAX && entries * 8 < out.n)
        entries *= 2;
    uint64_t *cache = map(entries * sizeof *cache);
    if (!cache) {
        munmap(out.rows, page_round(out.cap * sizeof *out.rows));
        munmap(index, page_round(nb * sizeof *index));
        return;
    }
    o->rows = out.rows;
    o->nrows = (uint32_t)out.n;
    o->map_bytes = page_round(out.cap * sizeof *out.rows);
    o->index = index;
    o->index_bytes = page_round(nb * sizeof *index);
    o->cache = cache;
    o->cache_mask = (uint32_t)(entries - 1);
    o->cache_bytes = page_round(entries * sizeof *cache);
}

/* Unmaps what compile_object mapped for o. */
static void unmap_tables(struct owned *o)
{
    munmap(o->rows, o->map_bytes);
    munmap(o->index, o->index_bytes);
    munmap(o->cache, o->cache_bytes);
}

/* Unmaps o's rows unless the published set uses them. */
static void drop_rows(struct owned *o)
{
    for (size_t j = 0; j < owned_n; j++)
        if (owned[j].rows == o->rows)
            return;
    if (o->rows)
        unmap_tables(o);
    o->rows = NULL;
}

static void sort_by_lo(struct owned *a, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        struct owned v = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1].lo > v.lo) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int rebuild(void)
{
    int64_t t0 = mono_ns();
    struct found f = {NULL, 0, 0, 0};
    size_t found_bytes = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        if (f.to) {
            for (size_t i = 0; i < f.n; i++)
                drop_rows(&f.to[i]);
            munmap(f.to, found_bytes);
        }
        f.cap = f.needed ? f.needed * 2 + 8 : 64;
        f.n = f.needed = 0;
        found_bytes = page_round(f.cap * sizeof *f.to);
        f.to = map(found_bytes);
        if (!f.to)
            return -ENOMEM;
        loader_iterate_phdr(collect, &f);
        if (f.needed <= f.cap)
            break;
    }
    if (f.needed > f.cap) {
        for (size_t i = 0; i < f.n; i++)
            drop_rows(&f.to[i]);
        munmap(f.to, found_bytes);
        return -EAGAIN;
    }
    sort_by_lo(f.to, f.n);
    /* Overlapping ranges (an object mapped over another's) keep the
     * first. */
    size_t kept = 0;
    for (size_t i = 0; i < f.n; i++) {
        struct owned *o = &f.to[i];
        if (kept > 0 && o->lo < f.to[kept - 1].hi) {
            drop_rows(o);
            continue;
        }
        f.to[kept++] = *o;
    }
    f.n = kept;
    struct cfi_set *set = map(cfi_set_bytes(f.n));
    if (!set) {
        for (size_t i = 0; i < f.n; i++)
            drop_rows(&f.to[i]);
        munmap(f.to, found_bytes);
        return -ENOMEM;
    }
    set->n = f.n;
    /* The rule cache after the objects, zeroed by mmap: every entry
     * empty. */
    set->rules = (uint64_t *)&set->objects[f.n];
    for (size_t i = 0; i < f.n; i++) {
        struct cfi_object *c = &set->objects[i];
        c->lo = f.to[i].lo;
        c->hi = f.to[i].hi;
        c->base = f.to[i].base;
        c->rows = f.to[i].rows;
        c->index = f.to[i].index;
        /* An object without rows: a shared empty cache, never written
         * (find_row stops at nrows == 0 before filling an entry). */
        c->cache = f.to[i].cache ? f.to[i].cache : (uint64_t *)empty_cache;
        c->cache_mask = f.to[i].cache ? f.to[i].cache_mask : 0;
        c->nrows = f.to[i].nrows;
    }
    struct cfi_set *old_set =
        __atomic_exchange_n(&cfi_current, set, __ATOMIC_SEQ_CST);
    synchronize();
    if (old_set)
        munmap(old_set, page_round(cfi_set_bytes(old_set->n)));
    for (size_t j = 0; j < owned_n; j++) {
        int still = 0;
        for (size_t i = 0; i < f.n && !still; i++)
            still = f.to[i].rows == owned[j].rows;
        if (owned[j].rows && !still)
            unmap_tables(&owned[j]);
    }
    if (owned)
        munmap(owned, owned_map_bytes);
    owned = f.to;
    owned_n = f.n;
    owned_map_bytes = found_bytes;
    size_t text = 0, bytes = cfi_set_bytes(f.n), with_rows = 0;
    for (size_t i = 0; i < f.n; i++) {
        text += f.to[i].hi - f.to[i].lo;
        if (f.to[i].rows) {
            with_rows++;
            bytes += f.to[i].nrows * sizeof(struct cfi_row) +
                     f.to[i].index_bytes + f.to[i].cache_bytes;
        }
    }
    log_debug("unwind tables: %zu of %zu objects, %zu KiB for %zu KiB of "
              "code, rebuilt in %lld us",
              with_rows, f.n, bytes >> 10, text >> 10,
              (long long)((mono_ns() - t0) / 1000));
    return (int)f.n;
}

/* 1 until the first cfi_tables_refresh() when cfi_tables_defer() was
 * called. */
static int deferred;

int cfi_tables_refresh(void)
{
    unsigned long long v[2] = {0, 0};
    /* Never waits for another writer: one may be waiting for the loader
     * lock this thread holds (a dlclose from a destructor or constructor).
     * The work is left to it, or to the next refresh. */
    int expected = 0;
    if (!__atomic_compare_exchange_n(&writer_lock, &expected, 1, 0,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        __atomic_store_n(&cfi_tables_stale, 1, __ATOMIC_RELAXED);
        return -EBUSY;
    }
    __atomic_store_n(&cfi_tables_stale, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&deferred, 0, __ATOMIC_RELAXED);
    loader_iterate_phdr(cfi_phdr_counters, v);
    int ret;
    if (cfi_current && v[0] == seen_adds && v[1] == seen_subs) {
        ret = (int)cfi_current->n;
    } else {
        ret = rebuild();
        if (ret >= 0) {
            seen_adds = v[0];
            seen_subs = v[1];
        }
    }
    __atomic_store_n(&writer_lock, 0, __ATOMIC_RELEASE);
    return ret;
}

void cfi_tables_defer(void)
{
    __atomic_store_n(&deferred, 1, __ATOMIC_RELAXED);
}

/* Adds the executable bytes of one loaded object to *data (a size_t). */
static int add_code_bytes(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD &&
            (info->dlpi_phdr[i].p_flags & PF_X))
            *(size_t *)data += info->dlpi_phdr[i].p_memsz;
    return 0;
}

/*
 * 1 when the walks made without tables have cost about what building them
 * costs, so the deferral is no longer worth it (a rent-or-buy rule: the
 * process never pays more than about twice the cheaper of the two). A
 * frame looked up without tables (cfi_parse_lookup on its FDE) costs about
 * 1 us here, and the build about 0.7 ms per MiB of code (3 MiB in 2 ms for
 * a small program with the agent's libraries; python3's 6.6 MiB in 8 ms):
 * so one frame per KiB of loaded code. The code is measured once, at the
 * first frame looked up that way.
 */
static int lookups_paid_for_build(void)
{
    static size_t frames_for_build;
    uint64_t frames = __atomic_load_n(&cfi_walk_counters.no_table,
                                      __ATOMIC_RELAXED);
    if (!frames)
        return 0;
    size_t limit = __atomic_load_n(&frames_for_build, __ATOMIC_RELAXED);
    if (!limit) {
        size_t code = 0;
        loader_iterate_phdr(add_code_bytes, &code);
        limit = code >> 10 ? code >> 10 : 1;
        __atomic_store_n(&frames_for_build, limit, __ATOMIC_RELAXED);
    }
    return frames >= limit;
}

int cfi_tables_maybe_refresh(void)
{
    if (!__atomic_load_n(&cfi_tables_stale, __ATOMIC_RELAXED))
        return 0;
    if (__atomic_load_n(&deferred, __ATOMIC_RELAXED)) {
        if (!lookups_paid_for_build())
            return 0;
        log_debug("unwind tables: built before the start delay ends: "
                  "%llu frames were looked up without them",
                  (unsigned long long)cfi_walk_counters.no_table);
    }
    return cfi_tables_refresh();
}

size_t cfi_tables_bytes(void)
{
    const struct cfi_set *set = cfi_current; /* the writer's thread only */
    size_t bytes = set ? cfi_set_bytes(set->n) : 0;
    for (size_t i = 0; set && i < set->n; i++)
        if (set->objects[i].nrows)
            bytes += (size_t)set->objects[i].nrows * sizeof(struct cfi_row) +
                     (((set->objects[i].hi - set->objects[i].lo) >>
                       CFI_BUCKET_SHIFT) + 2) * sizeof(uint32_t) +
                     (set->objects[i].cache
                          ? ((size_t)set->objects[i].cache_mask + 1) * 8
                          : 0);
    return bytes;
}

FORK_PATH void cfi_tables_fork_child(void)
{
    /* Walks and writers of the parent's other threads did not come
     * along. */
    FORK_SET_ATOMIC(writer_lock, 0);
    FORK_SET_ATOMIC(cfi_readers[0], 0);
    FORK_SET_ATOMIC(cfi_readers[1], 0);
}

__thread uintptr_t cfi_stack_lo, cfi_stack_hi
    __attribute__((tls_model("initial-exec")));

/*
 * The main thread's stack without pthread_getattr_np, which reads
 * /proc/self/maps with stdio (fopen allocates: a tenth of an exec'd
 * process's start under the agent). The kernel puts the executable's file
 * name (AT_EXECFN) at the very top of the initial stack, a pointer's size
 * below the mapping's end: hi is the page above it. The stack grows down to
 * at most its limit below that. Returns 0, or -1 when the figures do not
 * hold together (then the C library is asked).
 */
static int main_stack(uintptr_t *lo, uintptr_t *hi)
{
    if (getpid() != (pid_t)real_syscall(SYS_gettid))
        return -1;
    const char *fn = (const char *)getauxval(AT_EXECFN);
    struct rlimit rl;
    if (!fn || getrlimit(RLIMIT_STACK, &rl) != 0)
        return -1;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t top = ((uintptr_t)fn + strlen(fn) + 1 + sizeof(void *) + page - 1) &
                    ~(page - 1);
    uintptr_t size = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1UL << 32)
                         ? (1UL << 32)
                         : (uintptr_t)rl.rlim_cur;
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (here >= top || top - here > size || top < size)
        return -1;
    *lo = top - size;
    *hi = top;
    return 0;
}

void cfi_stack_learn(void)
{
    if (cfi_stack_hi)
        return;
    uintptr_t lo, hi;
    if (main_stack(&lo, &hi) == 0) {
        cfi_stack_lo = lo;
        cfi_stack_hi = hi;
        return;
    }
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) != 0)
        return;
    void *addr;
    size_t size;
    if (pthread_attr_getstack(&a, &addr, &size) == 0) {
        cfi_stack_lo = (uintptr_t)addr;
        cfi_stack_hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&a);
}
