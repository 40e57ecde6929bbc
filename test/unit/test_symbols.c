/*
 * Unit tests for the symbolizer (agent/symbols*.c, agent/host/maps.c): mappings
 * and build IDs against readelf, names and lines of this binary's own code,
 * libc names, demangling, unmapped addresses, inlined frames, and objects
 * loaded after the first refresh.
 */
#include "agent/stacks/objects.h"
#include "agent/stacks/stack.h"
#include "agent/symbols/symbols.h"
#include "encoder/encoder.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static const int static_fn_line = __LINE__ + 1;
static __attribute__((noinline)) int sym_test_static_fn(int x)
{
    /* Enough work that address + 5 is still inside the function. */
    volatile int acc = x;
    for (int i = 0; i < x; i++)
        acc += i * 3;
    return acc;
}

/* An always-inlined function calling out of line, so the return address
 * from inside it lies in inlined code. */
static void *captured_pc;

static __attribute__((noinline)) void sym_test_capture(void)
{
    captured_pc = __builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
}

static const int inline_call_line = __LINE__ + 4;
static inline __attribute__((always_inline)) void sym_test_inlined(void)
{
    __asm__ volatile("" ::: "memory");
    sym_test_capture();
    __asm__ volatile("" ::: "memory");
}

static const int outer_call_line = __LINE__ + 3;
static __attribute__((noinline)) void sym_test_outer(void)
{
    sym_test_inlined();
    __asm__ volatile("" ::: "memory");
}

/* Stops the test like assert_true, releasing the symbolizer first so the
 * next test can take it. */
#define assert_locked(c)                                                       \
    do {                                                                       \
        if (!(c)) {                                                            \
            symbols_unlock();                                                  \
            assert_true(c);                                                    \
        }                                                                      \
    } while (0)

static int ends_with(const char *s, const char *suffix)
{
    size_t a = s ? strlen(s) : 0, b = strlen(suffix);
    return s && a >= b && strcmp(s + a - b, suffix) == 0;
}

static void refresh(void)
{
    symbols_lock();
    int err = symbols_refresh();
    symbols_unlock();
    expect_int_eq(err, 0);
}

TEST(static_function_resolves)
{
    refresh();
    symbols_lock();
    uintptr_t fn = (uintptr_t)&sym_test_static_fn;
    struct sym_frame fr[8];
    for (int d = 0; d <= 5; d += 5) {
        int n = symbols_resolve(fn + (uintptr_t)d, fr, 8);
        assert_locked(n >= 1);
        const struct sym_frame *f = &fr[n - 1];
        expect_str_eq(f->name, "sym_test_static_fn");
        expect_str_eq(f->system_name, "sym_test_static_fn");
        expect_true(ends_with(f->file, "test_symbols.c"));
        expect_true(f->line >= static_fn_line && f->line < static_fn_line + 8);
        expect_int_eq(f->start_line, static_fn_line);
        expect_true(f->sym_start == fn);
    }
    symbols_unlock();
    expect_int_eq(sym_test_static_fn(3), 12);
}

TEST(libc_function_resolves)
{
    refresh();
    /* libc's own qsort: under ASan, RTLD_DEFAULT finds its interceptor. */
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    void *q = libc ? dlsym(libc, "qsort") : NULL;
    assert_true(q != NULL);
    symbols_lock();
    int mi = symbols_mapping_index((uintptr_t)q);
    assert_locked(mi >= 0);
    const struct sym_mapping *m = symbols_mapping_at((size_t)mi);
    expect_true(strstr(m->path, "libc") != NULL);
    expect_true(m->has_symbols);
    expect_true(strlen(m->build_id) == 40);
    struct sym_frame fr[8];
    int n = symbols_resolve((uintptr_t)q + 1, fr, 8);
    assert_locked(n >= 1);
    expect_true(strstr(fr[n - 1].name, "qsort") != NULL);
    expect_true(fr[n - 1].sym_start == (uintptr_t)q);
    /* Of aliases at one address, the shortest name: free, not cfree. */
    void *f = dlsym(libc, "free");
    n = f ? symbols_resolve((uintptr_t)f + 1, fr, 8) : 0;
    assert_locked(n >= 1);
    expect_str_eq(fr[n - 1].name, "free");
    symbols_unlock();
}

static void readelf_build_id(const char *path, char *out, size_t cap)
{
    char cmd[PATH_MAX + 64];
    out[0] = '\0';
    snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, "Build ID: ");
        if (p && sscanf(p + 10, "%127s", out) == 1 && strlen(out) < cap)
            break;
    }
    pclose(f);
}

TEST(main_executable_first)
{
    refresh();
    char exe[PATH_MAX];
    assert_true(realpath("/proc/self/exe", exe) != NULL);
    char want[128];
    readelf_build_id(exe, want, sizeof want);
    expect_true(strlen(want) > 0);
    symbols_lock();
    assert_locked(symbols_mapping_count() > 1);
    const struct sym_mapping *m = symbols_mapping_at(0);
    expect_str_eq(m->path, exe);
    expect_str_eq(m->build_id, want);
    expect_true(m->offset != 0 || m->start != 0);
    /* Every mapping has a real range and a path. */
    int vdso = 0;
    for (size_t i = 0; i < symbols_mapping_count(); i++) {
        const struct sym_mapping *x = symbols_mapping_at(i);
        expect_true(x->start < x->limit);
        expect_true(x->path && x->path[0]);
        expect_true(!ends_with(x->path, " (deleted)"));
        if (strcmp(x->path, "[vdso]") == 0) {
            vdso = 1;
            expect_true(x->has_symbols);
        }
    }
    /* Valgrind hides the vdso (and its auxv entry) from the guest. */
    expect_true(vdso || getauxval(AT_SYSINFO_EHDR) == 0);
    expect_true(symbols_mapping_at(symbols_mapping_count()) == NULL);
    symbols_unlock();
}

TEST(libc_build_id_matches_readelf)
{
    refresh();
    symbols_lock();
    int mi = symbols_mapping_index((uintptr_t)dlsym(RTLD_DEFAULT, "qsort"));
    char path[PATH_MAX] = "";
    char got[128] = "";
    if (mi >= 0) {
        snprintf(path, sizeof path, "%s", symbols_mapping_at((size_t)mi)->path);
        snprintf(got, sizeof got, "%s", symbols_mapping_at((size_t)mi)->build_id);
    }
    symbols_unlock();
    assert_true(mi >= 0);
    char want[128];
    readelf_build_id(path, want, sizeof want);
    expect_str_eq(got, want);
}

static int main_bias(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(uintptr_t *)data = info->dlpi_addr; /* the first is the executable */
    return 1;
}

/* Each stub of this executable's PLT that jumps through a relocated slot
 * is named "<target>@plt" (it took the unsized _init's name before). */
TEST(plt_stubs_named)
{
#if defined(__x86_64__)
    refresh();
    uintptr_t bias = 0;
    dl_iterate_phdr(main_bias, &bias);
    elf_version(EV_CURRENT);
    int fd = open("/proc/self/exe", O_RDONLY);
    assert_true(fd >= 0);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    assert_true(elf != NULL);
    size_t named = 0, stubs = 0;
    char first[128] = "";
    symbols_lock();
    for (int t = 0; t < 2; t++) {
        Elf_Scn *scn = symbols_elf_section(elf, t ? ".plt.sec" : ".plt");
        GElf_Shdr sh;
        if (!scn || !gelf_getshdr(scn, &sh))
            continue;
        for (uint64_t off = 16; off + 16 <= sh.sh_size; off += 16) {
            struct sym_frame fr[4];
            int n = symbols_resolve(bias + sh.sh_addr + off + 2, fr, 4);
            stubs++;
            if (n >= 1 && ends_with(fr[n - 1].name, "@plt")) {
                named++;
                if (!first[0])
                    snprintf(first, sizeof first, "%s", fr[n - 1].name);
            }
            assert_locked(n < 1 || strcmp(fr[n - 1].name, "_init") != 0);
        }
    }
    symbols_unlock();
    elf_end(elf);
    close(fd);
    printf("# %zu of %zu PLT entries named, e.g. %s\n", named, stubs, first);
    expect_true(named >= 1);
#endif
}

TEST(demangles)
{
    char *s = symbols_demangle("_ZN2ns6Widget4leafIlEEiT_");
    expect_str_eq(s, "int ns::Widget::leaf<long>(long)");
    free(s);
    s = symbols_demangle("_ZNSt6vectorIiSaIiEE9push_backERKi");
    expect_str_eq(s, "std::vector<int, std::allocator<int> >::push_back(int const&)");
    free(s);
    s = symbols_demangle("_ZN4core3fmt5write17h0123456789abcdefE");
    expect_str_eq(s, "core::fmt::write");
    free(s);
    expect_true(symbols_demangle("qsort") == NULL);
    expect_true(symbols_demangle("_start") == NULL);
    expect_true(symbols_demangle(NULL) == NULL);
}

TEST(unmapped_address_is_unknown)
{
    refresh();
    void *heap = malloc(64);
    symbols_lock();
    struct sym_frame fr[4];
    expect_int_eq(symbols_resolve(0x10000, fr, 4), 0);
    expect_int_eq(symbols_mapping_index(0x10000), -1);
    expect_int_eq(symbols_resolve((uintptr_t)heap, fr, 4), 0);
    expect_int_eq(symbols_resolve(UINTPTR_MAX - 4096, fr, 4), 0);
    expect_int_eq(symbols_resolve((uintptr_t)&sym_test_static_fn, fr, 0), 0);
    symbols_unlock();
    free(heap);
}

TEST(pseudo_names)
{
    expect_str_eq(symbols_pseudo_name(FRAME_TRUNCATED), "[truncated]");
    expect_str_eq(symbols_pseudo_name(FRAME_LOST), "[lost samples]");
    expect_str_eq(symbols_pseudo_name(FRAME_UNKNOWN), "[unknown]");
    expect_true(symbols_pseudo_name(0x400000) == NULL);
}

TEST(inlined_frames_innermost_first)
{
    sym_test_outer();
    refresh();
    symbols_lock();
    struct sym_frame fr[8], one[1];
    int n = symbols_resolve((uintptr_t)captured_pc - 1, fr, 8);
    /* A caller that only keeps one frame gets the innermost. */
    int n1 = symbols_resolve((uintptr_t)captured_pc - 1, one, 1);
    /* The strings stay valid after unlocking only because nothing else
     * refreshes in this single-threaded test. */
    symbols_unlock();
    expect_int_eq(n, 2);
    assert_true(n == 2 && n1 == 1);
    expect_str_eq(fr[0].name, "sym_test_inlined");
    expect_int_eq(fr[0].line, inline_call_line);
    expect_str_eq(fr[1].name, "sym_test_outer");
    expect_int_eq(fr[1].line, outer_call_line);
    expect_true(ends_with(fr[1].file, "test_symbols.c"));
    expect_str_eq(one[0].name, "sym_test_inlined");
}

TEST(dlopen_after_refresh)
{
    refresh();
    void *h = dlopen("libbz2.so.1.0", RTLD_NOW | RTLD_LOCAL);
    const char *sym = "BZ2_bzCompress";
    if (!h) {
        h = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
        sym = "cbrt";
    }
    assert_true(h != NULL);
    void *fn = dlsym(h, sym);
    assert_true(fn != NULL);
    symbols_lock();
    /* Without an invalidation the refresh keeps the old list. */
    expect_int_eq(symbols_refresh(), 0);
    int before = symbols_mapping_index((uintptr_t)fn);
    objects_changed();
    expect_int_eq(symbols_refresh(), 0);
    struct sym_frame fr[8];
    int n = symbols_resolve((uintptr_t)fn, fr, 8);
    expect_true(n >= 1);
    if (n >= 1)
        expect_true(strstr(fr[n - 1].name, sym) != NULL);
    symbols_unlock();
    (void)before;
    dlclose(h);
    objects_changed();
    refresh();
}

TEST(stacks_glue)
{
    struct profile *p = profile_new();
    assert_true(p != NULL);
    struct stack_encoder *se = stacks_begin(p);
    assert_true(se != NULL);
    uintptr_t fn = (uintptr_t)&sym_test_static_fn + 1;
    uintptr_t pcs[5] = {fn, FRAME_TRUNCATED, 0x10000, fn, FRAME_TRUNCATED};
    uint64_t ids[5] = {0};
    size_t n = stacks_locations(se, pcs, 5, ids);
    struct pbuf text = {0};
    stacks_describe(fn, &text);
    stacks_describe(0x10000, &text);
    stacks_end(se);
    expect_int_eq(n, 5);
    expect_true(ids[0] && ids[1] && ids[2]);
    expect_true(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
    expect_int_eq(ids[3], ids[0]);
    expect_int_eq(ids[4], ids[1]);
    expect_int_eq(profile_find_location(p, fn), ids[0]);
    pbuf_append(&text, "", 1);
    assert_true(!text.oom);
    char want[128];
    snprintf(want, sizeof want, "#\t0x%lx\tsym_test_static_fn+0x1\t",
             (unsigned long)fn);
    expect_true(strncmp((char *)text.data, want, strlen(want)) == 0);
    expect_true(strstr((char *)text.data, "test_symbols.c:") != NULL);
    expect_true(strstr((char *)text.data, "\n#\t0x10000\n") != NULL);
    struct pbuf out = {0};
    expect_int_eq(profile_serialize(p, &out), 0);
    expect_true(memmem(out.data, out.len, "[truncated]", 11) != NULL);
    expect_true(memmem(out.data, out.len, "sym_test_static_fn", 18) != NULL);
    pbuf_free(&out);
    pbuf_free(&text);
    profile_free(p);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct unnamed_probe {
    const char *path;
    int found;
};

static void find_unnamed(void *arg, const char *path, const char *build_id,
                         int exported_only)
{
    struct unnamed_probe *p = arg;
    (void)build_id;
    (void)exported_only;
    if (strcmp(path, p->path) == 0)
        p->found = 1;
}

/* Mostly not a check: reports how fast first lookups (DWARF walk) and
 * repeated lookups (cache) are, so regressions are visible in the log. */
TEST(resolve_speed)
{
    uintptr_t base = (uintptr_t)dlsym(RTLD_DEFAULT, "qsort");
    refresh();
    symbols_lock();
    int mi = symbols_mapping_index(base);
    assert_locked(mi >= 0);
    const struct sym_mapping *m = symbols_mapping_at((size_t)mi);
    uintptr_t start = m->start, limit = m->limit;
    struct sym_frame fr[8];
    /* Warm up: the first lookup loads the object's tables and DWARF. */
    symbols_resolve(base, fr, 8);
    enum { N = 4000 };
    uintptr_t step = (limit - start) / N;
    int named = 0;
    double t0 = now();
    for (int i = 0; i < N; i++)
        named += symbols_resolve(start + (uintptr_t)i * step + 1, fr, 8) > 0;
    double cold = now() - t0;
    t0 = now();
    for (int k = 0; k < 10; k++)
        for (int i = 0; i < N; i++)
            symbols_resolve(start + (uintptr_t)i * step + 1, fr, 8);
    double warm = now() - t0;
    char libc_path[PATH_MAX];
    snprintf(libc_path, sizeof libc_path, "%s", m->path);
    symbols_unlock();
    /* With libc's debug file (libc6-dbg) most addresses are named; without
     * it only the exported functions are, about a third of the text. */
    struct unnamed_probe probe = {libc_path, 0};
    symbols_list_unnamed(find_unnamed, &probe);
    expect_true(named > (probe.found ? N / 5 : N / 2));
    fprintf(stderr,
            "  resolve_speed: libc, %d distinct addresses: %.0f/s first time, "
            "%.0f/s cached (%d named, libc %s)\n",
            N, N / cold, 10 * N / warm, named,
            probe.found ? "exported names only" : "with its debug file");
}

int main(void)
{
    return run_tests(static_function_resolves, libc_function_resolves,
                     main_executable_first, libc_build_id_matches_readelf,
                     plt_stubs_named, demangles, unmapped_address_is_unknown,
                     pseudo_names,
                     inlined_frames_innermost_first, dlopen_after_refresh,
                     stacks_glue, resolve_speed, NULL);
}
