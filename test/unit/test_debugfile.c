/*
 * Unit tests for agent/symbols/symbols_debug.c: the debuglink CRC, PPROF_DEBUG_DIR
 * parsing, and names for a shared library loaded with dlopen after being
 * stripped three ways (debug file in a build-ID tree, MiniDebugInfo,
 * nothing). The library is built by this test with cc, objcopy and xz, as
 * the integration test builds its executables.
 */
#include "agent/config.h"
#include "agent/log.h"
#include "agent/stacks/objects.h"
#include "agent/symbols/symbols.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char dir[1024];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int r = system(cmd);
    if (r != 0)
        fprintf(stderr, "  command failed (%d): %s\n", r, cmd);
    return r;
}

TEST(crc_is_binutils_crc32)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/check", dir);
    FILE *f = fopen(path, "w");
    assert_true(f != NULL);
    fputs("123456789", f);
    fclose(f);
    uint32_t crc = 0;
    expect_int_eq(symbols_debug_crc(path, &crc), 0);
    /* The CRC-32 check value, which bfd's debuglink CRC also gives. */
    expect_int_eq(crc, 0xcbf43926u);
    snprintf(path, sizeof path, "%s/missing", dir);
    expect_int_eq(symbols_debug_crc(path, &crc), -ENOENT);
}

TEST(debug_dir_parsing)
{
    setenv("PPROF_DEBUG_DIR", "/a:/b/c::/d", 1);
    opt_debug_dir[0] = '\0';
    config_load();
    expect_str_eq(opt_debug_dir, "/a:/b/c::/d");
    setenv("PPROF_DEBUG_DIR", "/a:relative", 1);
    opt_debug_dir[0] = '\0';
    config_load();
    expect_str_eq(opt_debug_dir, "");
    unsetenv("PPROF_DEBUG_DIR");
    opt_debug_dir[0] = '\0';
}

static const char lib_src[] =
    "static __attribute__((noinline)) int dbg_lib_static(int x)\n"
    "{\n"
    "    volatile int a = x;\n"
    "    for (int i = 0; i < x; i++)\n"
    "        a += i;\n"
    "    return a;\n"
    "}\n"
    "void *dbg_lib_entry(void) { return (void *)&dbg_lib_static; }\n";

/* Builds dir/lib.so (with debug info) once. */
static int build_lib(void)
{
    static int built = -1;
    if (built >= 0)
        return built;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/dbglib.c", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return built = 0;
    fputs(lib_src, f);
    fclose(f);
    built = sh("cd '%s' && cc -shared -fPIC -g -O1 -o lib.so dbglib.c && "
               "objcopy --only-keep-debug lib.so lib.debug",
               dir) == 0;
    return built;
}

struct probe {
    const char *path;
    int found;
    int exported_only;
};

static void on_unnamed(void *arg, const char *path, const char *build_id,
                       int exported_only)
{
    struct probe *p = arg;
    (void)build_id;
    if (strstr(path, p->path)) {
        p->found = 1;
        p->exported_only = exported_only;
    }
}

/* dlopens dir/name and resolves its static function: returns the number
 * of frames, with the outermost one's name and file copied out. */
static int resolve_static(const char *name, char *fn, char *file,
                          struct probe *unnamed)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "  dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    void *(*entry)(void) = (void *(*)(void))dlsym(h, "dbg_lib_entry");
    uintptr_t addr = entry ? (uintptr_t)entry() + 4 : 0;
    objects_changed();
    symbols_lock();
    symbols_refresh();
    struct sym_frame fr[8];
    int n = addr ? symbols_resolve(addr, fr, 8) : -1;
    fn[0] = file[0] = '\0';
    if (n > 0) {
        snprintf(fn, 128, "%s", fr[n - 1].name);
        snprintf(file, PATH_MAX, "%s", fr[n - 1].file ? fr[n - 1].file : "");
    }
    symbols_unlock();
    unnamed->path = name;
    symbols_list_unnamed(on_unnamed, unnamed);
    dlclose(h);
    objects_changed();
    return n;
}

TEST(library_debug_file_by_build_id)
{
    assert_true(build_lib());
    assert_true(sh("cd '%s' && objcopy --strip-all lib.so lib-buildid.so && "
                   "id=$(readelf -n lib.so | sed -n 's/.*Build ID: *//p') && "
                   "mkdir -p dd/.build-id/$(echo $id | cut -c1-2) && "
                   "cp lib.debug dd/.build-id/$(echo $id | cut -c1-2)/"
                   "$(echo $id | cut -c3-).debug",
                   dir) == 0);
    snprintf(opt_debug_dir, sizeof opt_debug_dir, "/nonexistent:%s/dd", dir);
    char fn[128], file[PATH_MAX];
    struct probe p = {0};
    int n = resolve_static("lib-buildid.so", fn, file, &p);
    opt_debug_dir[0] = '\0';
    expect_true(n >= 1);
    expect_str_eq(fn, "dbg_lib_static");
    expect_true(strstr(file, "dbglib.c") != NULL);
    expect_int_eq(p.found, 0);
}

TEST(library_minidebuginfo)
{
    assert_true(build_lib());
    assert_true(
        sh("cd '%s' && "
           "nm -D lib.so --format=posix --defined-only | awk '{print $1}' | "
           "sort > dyn && nm lib.so --format=posix --defined-only | "
           "awk '$2 == \"T\" || $2 == \"t\" {print $1}' | sort > funcs && "
           "comm -13 dyn funcs > keep && "
           "objcopy -S --keep-symbols=keep lib.debug mini && xz -f mini && "
           "objcopy --strip-all --add-section .gnu_debugdata=mini.xz lib.so "
           "lib-mini.so",
           dir) == 0);
    char fn[128], file[PATH_MAX];
    struct probe p = {0};
    int n = resolve_static("lib-mini.so", fn, file, &p);
    expect_int_eq(n, 1);
    expect_str_eq(fn, "dbg_lib_static");
    expect_str_eq(file, ""); /* MiniDebugInfo has no lines */
    expect_int_eq(p.found, 0);
}

TEST(library_without_symbols)
{
    assert_true(build_lib());
    assert_true(
        sh("cd '%s' && objcopy --strip-all lib.so lib-none.so", dir) == 0);
    char fn[128], file[PATH_MAX];
    struct probe p = {0};
    int n = resolve_static("lib-none.so", fn, file, &p);
    /* The static function has no name anywhere (the exported one would):
     * it is named after its object and its start, which the unwind
     * tables give and the unstripped library's symbol table confirms. */
    char want[128], cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd,
             "nm '%s/lib.so' | sed -n 's/^0*\\([0-9a-f]*\\) t "
             "dbg_lib_static$/\\1/p'",
             dir);
    FILE *nm = popen(cmd, "r");
    assert_true(nm != NULL);
    char hex[64] = "";
    if (!fgets(hex, sizeof hex, nm))
        hex[0] = '\0';
    pclose(nm);
    hex[strcspn(hex, "\n")] = '\0';
    snprintf(want, sizeof want, "lib-none.so+0x%s", hex);
    expect_int_eq(n, 1);
    expect_str_eq(fn, want);
    expect_str_eq(file, "");
    expect_int_eq(p.found, 1);
    expect_int_eq(p.exported_only, 1);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/pprof-debugfile.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    /* Logging goes to stderr like the agent's; quiet keeps the log short. */
    opt_log_level = LOG_QUIET;
    int r = run_tests(crc_is_binutils_crc32, debug_dir_parsing,
                      library_debug_file_by_build_id, library_minidebuginfo,
                      library_without_symbols, NULL);
    sh("rm -rf '%s'", dir);
    return r;
}
