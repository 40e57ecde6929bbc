/*
 * symbols_debug.c owns the search for names an object does not carry
 * itself, the way gdb searches:
 *
 *   1. a separate debug file by GNU build ID, DIR/.build-id/xx/rest.debug;
 *   2. the file named by .gnu_debuglink, next to the object, in its .debug/
 *      folder, under DIR plus the object's directory, then DIR/name; the
 *      CRC the link records must match the file;
 *   3. MiniDebugInfo: an xz-compressed ELF in .gnu_debugdata holding the
 *      functions .dynsym leaves out (Fedora, CentOS and others ship it).
 *
 * DIR is each PPROF_DEBUG_DIR entry, then /usr/lib/debug. The outcome is
 * cached in the object: every search runs once per object, on an agent
 * thread under the symbolizer lock, while a profile is encoded or the index
 * page is built; never from a signal handler or an interposed call.
 *
 * Every file here may be missing, truncated, hostile or another build: a
 * bad candidate costs one log line and is skipped, never a crash. The
 * decompressed MiniDebugInfo is bounded in size.
 */
#include "agent/symbols/symbols.h"
#include "agent/core/real.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "agent/config.h"
#include "agent/host/fds.h"
#include "agent/core/libs.h"
#include "agent/log.h"

/* Overridable at build time to test machines without debug packages. */
#ifndef SYSTEM_DEBUG_DIR
#define SYSTEM_DEBUG_DIR "/usr/lib/debug"
#endif

/* A MiniDebugInfo section decompresses to a few hundred KiB; anything past
 * this is not one, and the agent's memory must stay bounded. */
#define MINI_MAX (64u << 20)

/* Log lines about symbols, across all objects: a process that maps
 * hundreds of stripped libraries gets this many, then one notice. */
#define LOG_BUDGET 32

static int log_budget = LOG_BUDGET;

/* Rate-limited log line; the lock serializes callers. */
__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    if (log_budget <= 0)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    log_format(line, sizeof line, fmt, ap);
    va_end(ap);
    log_debug("%s", line);
    if (--log_budget == 0)
        log_debug("further messages about missing symbols are suppressed");
}

/* ---- debug directories --------------------------------------------------- */

/* Calls try(dir) for each PPROF_DEBUG_DIR entry, then the system directory
 * when with_system is set, until try returns nonzero; returns that value. */
static int each_dir(int with_system, int (*try)(struct sym_object *, const char *,
                                                const void *),
                    struct sym_object *o, const void *arg)
{
    const char *p = opt_debug_dir;
    while (*p) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char dir[PATH_MAX];
        if (n > 0 && n < sizeof dir) {
            memcpy(dir, p, n);
            dir[n] = '\0';
            int r = try(o, dir, arg);
            if (r)
                return r;
        }
        p += n;
        if (*p == ':')
            p++;
    }
    return with_system ? try(o, SYSTEM_DEBUG_DIR, arg) : 0;
}

static int usable_debug_elf(Elf *elf)
{
    return symbols_elf_has_type(elf, SHT_SYMTAB) ||
           symbols_elf_section(elf, ".debug_info") != NULL;
}

/* ---- 1. by build ID ------------------------------------------------------ */

static int try_build_id(struct sym_object *o, const char *dir,
                        const void *arg)
{
    (void)arg;
    char path[PATH_MAX];
    int r = snprintf(path, sizeof path, "%s/.build-id/%.2s/%s.debug", dir,
                     o->build_id, o->build_id + 2);
    if (r < 0 || (size_t)r >= sizeof path || access(path, F_OK) != 0)
        return 0;
    Elf *elf = symbols_elf_open_file(path);
    if (!elf) {
        note("debug file %s for %s is not a readable ELF file; ignored", path,
             o->path);
        return 0;
    }
    char *id = symbols_elf_build_id(elf);
    int same = id && strcmp(id, o->build_id) == 0;
    if (!same && id)
        note("debug file %s for %s has build ID %s; ignored", path, o->path,
             id[0] ? id : "none");
    else if (same && !usable_debug_elf(elf))
        note("debug file %s for %s has no symbols or is truncated; ignored",
             path, o->path);
    real_free(id);
    if (!same || !usable_debug_elf(elf)) {
        elf_end(elf);
        return 0;
    }
    o->debug_elf = elf;
    o->debug_path = strdup(path);
    return 1;
}

/* ---- 2. by .gnu_debuglink ------------------------------------------------ */

int symbols_debug_crc(const char *path, uint32_t *crc)
{
    if (libs_load() != 0)
        return -ENOSYS;
    int fd = fds_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fds_close(fd);
        return -EINVAL;
    }
    uLong c = crc32(0, Z_NULL, 0);
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int err = -errno;
            fds_close(fd);
            return err;
        }
        c = crc32_z(c, p, (z_size_t)st.st_size);
        munmap(p, (size_t)st.st_size);
    }
    fds_close(fd);
    *crc = (uint32_t)c;
    return 0;
}

struct debuglink {
    char name[NAME_MAX + 1];
    uint32_t crc;
    char objdir[PATH_MAX]; /* the object's directory, no trailing slash */
};

/* Reads the link: a NUL-terminated file name, padding to 4 bytes, and the
 * CRC-32 in the object's byte order. */
static int read_debuglink(Elf *elf, struct debuglink *l)
{
    Elf_Scn *scn = symbols_elf_section(elf, ".gnu_debuglink");
    Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
    if (!d || !d->d_buf || d->d_size < 8)
        return -ENOENT;
    const char *b = d->d_buf;
    size_t n = strnlen(b, d->d_size);
    size_t crc_at = (n + 4) & ~(size_t)3;
    if (n == 0 || n > NAME_MAX || crc_at + 4 > d->d_size || strchr(b, '/'))
        return -EINVAL;
    memcpy(l->name, b, n);
    l->name[n] = '\0';
    unsigned char c[4];
    memcpy(c, b + crc_at, 4);
    GElf_Ehdr eh;
    if (!gelf_getehdr(elf, &eh))
        return -EINVAL;
    if (eh.e_ident[EI_DATA] == ELFDATA2MSB)
        l->crc = (uint32_t)c[0] << 24 | (uint32_t)c[1] << 16 |
                 (uint32_t)c[2] << 8 | c[3];
    else
        l->crc = (uint32_t)c[3] << 24 | (uint32_t)c[2] << 16 |
                 (uint32_t)c[1] << 8 | c[0];
    return 0;
}

/* Accepts path when it exists, is not the object itself, and its CRC is
 * the one the link records. */
static int try_link_path(struct sym_object *o, const struct debuglink *l,
                         const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    /* The link often names a file with the object's own name; next to the
     * object, that is the object. */
    if (st.st_ino == o->inode && st.st_dev == o->dev)
        return 0;
    uint32_t crc;
    if (symbols_debug_crc(path, &crc) != 0)
        return 0;
    if (crc != l->crc) {
        note("debug file %s for %s has CRC %x, the link wants %x; ignored",
             path, o->path, crc, l->crc);
        return 0;
    }
    Elf *elf = symbols_elf_open_file(path);
    if (!elf || !usable_debug_elf(elf)) {
        note("debug file %s for %s is not an ELF file with symbols; ignored",
             path, o->path);
        if (elf)
            elf_end(elf);
        return 0;
    }
    o->debug_elf = elf;
    o->debug_path = strdup(path);
    return 1;
}

static int try_link_dir(struct sym_object *o, const char *dir,
                        const void *arg)
{
    const struct debuglink *l = arg;
    char path[PATH_MAX];
    int r = snprintf(path, sizeof path, "%s%s/%s", dir, l->objdir, l->name);
    if (r > 0 && (size_t)r < sizeof path && try_link_path(o, l, path))
        return 1;
    return 0;
}

/* PPROF_DEBUG_DIR may also be a flat folder of debug files (a volume
 * mounted into a container): DIR/name. */
static int try_link_flat(struct sym_object *o, const char *dir,
                         const void *arg)
{
    const struct debuglink *l = arg;
    char path[PATH_MAX];
    int r = snprintf(path, sizeof path, "%s/%s", dir, l->name);
    return r > 0 && (size_t)r < sizeof path && try_link_path(o, l, path);
}

static void find_by_debuglink(struct sym_object *o)
{
    struct debuglink l;
    if (read_debuglink(o->elf, &l) != 0)
        return;
    const char *slash = strrchr(o->path, '/');
    if (!slash || (size_t)(slash - o->path) >= sizeof l.objdir)
        return;
    memcpy(l.objdir, o->path, (size_t)(slash - o->path));
    l.objdir[slash - o->path] = '\0';

    char path[PATH_MAX];
    int r = snprintf(path, sizeof path, "%s/%s", l.objdir, l.name);
    if (r > 0 && (size_t)r < sizeof path && try_link_path(o, &l, path))
        return;
    r = snprintf(path, sizeof path, "%s/.debug/%s", l.objdir, l.name);
    if (r > 0 && (size_t)r < sizeof path && try_link_path(o, &l, path))
        return;
    if (each_dir(1, try_link_dir, o, &l))
        return;
    each_dir(0, try_link_flat, o, &l);
}

/* ---- 3. MiniDebugInfo ---------------------------------------------------- */

/* Decompresses an xz stream into a malloc'd buffer of at most MINI_MAX
 * bytes. Returns 0 or -errno (-EINVAL for corrupt data). */
static int unxz(const void *in, size_t in_size, void **out, size_t *out_size)
{
    lzma_stream s = LZMA_STREAM_INIT;
    if (lzma_stream_decoder(&s, MINI_MAX, 0) != LZMA_OK)
        return -ENOMEM;
    size_t cap = in_size * 4 > 65536 ? in_size * 4 : 65536;
    if (cap > MINI_MAX)
        cap = MINI_MAX;
    unsigned char *buf = real_malloc(cap);
    int err = buf ? 0 : -ENOMEM;
    s.next_in = in;
    s.avail_in = in_size;
    while (!err) {
        s.next_out = buf + s.total_out;
        s.avail_out = cap - s.total_out;
        lzma_ret r = lzma_code(&s, LZMA_FINISH);
        if (r == LZMA_STREAM_END)
            break;
        if (r != LZMA_OK && r != LZMA_BUF_ERROR) {
            err = r == LZMA_MEM_ERROR ? -ENOMEM : -EINVAL;
            break;
        }
        if (s.avail_out != 0) {
            err = -EINVAL; /* input ended before the stream did */
            break;
        }
        if (cap >= MINI_MAX) {
            err = -EFBIG;
            break;
        }
        size_t ncap = cap * 2 > MINI_MAX ? MINI_MAX : cap * 2;
        unsigned char *nb = real_realloc(buf, ncap);
        if (!nb) {
            err = -ENOMEM;
            break;
        }
        buf = nb;
        cap = ncap;
    }
    size_t total = (size_t)s.total_out;
    lzma_end(&s);
    if (err) {
        real_free(buf);
        return err;
    }
    *out = buf;
    *out_size = total;
    return 0;
}

static void find_minidebuginfo(struct sym_object *o)
{
    Elf_Scn *scn = symbols_elf_section(o->elf, ".gnu_debugdata");
    if (!scn)
        return;
    Elf_Data *d = elf_rawdata(scn, NULL);
    if (!d || !d->d_buf || d->d_size == 0)
        return;
    void *image = NULL;
    size_t size = 0;
    int err = unxz(d->d_buf, d->d_size, &image, &size);
    if (err) {
        note("MiniDebugInfo of %s cannot be decompressed (%s); ignored",
             o->path,
             err == -EFBIG    ? "larger than 64 MiB"
             : err == -ENOMEM ? "out of memory"
                              : "corrupt xz data");
        return;
    }
    Elf *elf = elf_memory(image, size);
    if (!elf || elf_kind(elf) != ELF_K_ELF ||
        !symbols_elf_has_type(elf, SHT_SYMTAB)) {
        note("MiniDebugInfo of %s is not an ELF file with a symbol table; "
             "ignored",
             o->path);
        if (elf)
            elf_end(elf);
        real_free(image);
        return;
    }
    o->mini_elf = elf;
    o->mini_image = image;
}

/* ---- the search ---------------------------------------------------------- */

static int found_one(void *ctx, uint64_t value, uint64_t size,
                     unsigned char info, const char *name)
{
    (void)ctx, (void)value, (void)size, (void)info, (void)name;
    return 1;
}

/* 1 when .dynsym defines at least one function: a stripped executable's
 * .dynsym usually lists only what it imports. */
static int exports_functions(Elf *elf)
{
    return symbols_elf_each_function(elf, SHT_DYNSYM, found_one, NULL);
}

void symbols_debug_find(struct sym_object *o)
{
    if (o->debug_searched)
        return;
    o->debug_searched = 1;
    o->source = SYM_SOURCE_NONE;
    if (!o->elf)
        return;
    int own_symtab = symbols_elf_has_type(o->elf, SHT_SYMTAB);
    int own_dwarf = symbols_elf_section(o->elf, ".debug_info") != NULL;

    /* An in-memory object ([vdso]) has no path to search from, and an
     * unstripped object is complete on its own. */
    if (!o->image && (!own_symtab || !own_dwarf)) {
        if (strlen(o->build_id) >= 4)
            each_dir(1, try_build_id, o, NULL);
        if (!o->debug_elf)
            find_by_debuglink(o);
    }

    if (own_symtab) {
        o->source = SYM_SOURCE_OWN;
        return;
    }
    if (o->debug_elf && symbols_elf_has_type(o->debug_elf, SHT_SYMTAB)) {
        o->source = SYM_SOURCE_DEBUG_FILE;
        return;
    }
    find_minidebuginfo(o);
    if (o->mini_elf)
        o->source = SYM_SOURCE_MINIDEBUG;
    else if (exports_functions(o->elf))
        o->source = SYM_SOURCE_DYNAMIC;
}

void symbols_debug_report(struct sym_object *o)
{
    if (o->logged || o->source >= SYM_SOURCE_MINIDEBUG || o->image ||
        o->path[0] != '/')
        return;
    o->logged = 1;
    note("%s (build ID %s) has %s stay addresses; install its debug "
         "file, set PPROF_DEBUG_DIR, or symbolize offline with "
         "'go tool pprof BINARY_OR_DEBUG_FILE URL'",
         o->path, o->build_id[0] ? o->build_id : "none",
         o->source == SYM_SOURCE_DYNAMIC
             ? "only exported symbols: its other functions"
             : "no symbol table: its functions");
}

void symbols_debug_close(struct sym_object *o)
{
    if (o->debug_elf)
        elf_end(o->debug_elf);
    if (o->mini_elf)
        elf_end(o->mini_elf);
    real_free(o->mini_image);
    real_free(o->debug_path);
    o->debug_elf = o->mini_elf = NULL;
    o->mini_image = NULL;
    o->debug_path = NULL;
}

void symbols_debug_unload(struct sym_object *o)
{
    if (o->debug_elf)
        elf_end(o->debug_elf);
    o->debug_elf = NULL;
}

void symbols_debug_reopen(struct sym_object *o)
{
    if (o->debug_elf || !o->debug_path)
        return;
    Elf *elf = symbols_elf_open_file(o->debug_path);
    if (!elf)
        return;
    /* The file found before, unless it was replaced since: then the
     * object goes on without it (its symbols and lines as if none). */
    char *id = symbols_elf_build_id(elf);
    if (!id || (id[0] && o->build_id[0] && strcmp(id, o->build_id) != 0)) {
        elf_end(elf);
        elf = NULL;
    }
    real_free(id);
    o->debug_elf = elf;
}
