/*
 * Unit tests for the symbolizer's release (symbols_release): after the
 * objects' tables and DWARF are given back, the answers are the same,
 * from the cache of answers (which owns its strings) and from a reload
 * after the mappings were re-read (which empties the cache): names, files,
 * lines, declaration lines and symbol starts, for addresses all over libc
 * (with its debug file when installed) and in this program.
 */
#include "agent/stacks/objects.h"
#include "agent/symbols/symbols.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static __attribute__((noinline)) int release_test_fn(int x)
{
    volatile int acc = x;
    for (int i = 0; i < x; i++)
        acc += i;
    return acc;
}

#define NADDR 400
#define MAXF 8

struct answer {
    int n;
    struct {
        char *name, *system_name, *file;
        int line, start_line;
        uintptr_t sym_start;
    } f[MAXF];
};

static uintptr_t addrs[NADDR];
static struct answer first[NADDR];

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Resolves every address; records the answers into out, or compares them
 * with first. Returns how many addresses had a name. */
static int pass(struct answer *out)
{
    int named = 0;
    symbols_lock();
    symbols_refresh();
    for (int i = 0; i < NADDR; i++) {
        struct sym_frame fr[MAXF];
        int n = symbols_resolve(addrs[i], fr, MAXF);
        named += n > 0;
        if (out) {
            out[i].n = n;
            for (int k = 0; k < n; k++) {
                out[i].f[k].name = dup_or_null(fr[k].name);
                out[i].f[k].system_name = dup_or_null(fr[k].system_name);
                out[i].f[k].file = dup_or_null(fr[k].file);
                out[i].f[k].line = fr[k].line;
                out[i].f[k].start_line = fr[k].start_line;
                out[i].f[k].sym_start = fr[k].sym_start;
            }
            continue;
        }
        const struct answer *a = &first[i];
        expect_int_eq(n, a->n);
        for (int k = 0; k < n && k < a->n; k++) {
            expect_true(same_str(fr[k].name, a->f[k].name));
            expect_true(same_str(fr[k].system_name, a->f[k].system_name));
            expect_true(same_str(fr[k].file, a->f[k].file));
            expect_int_eq(fr[k].line, a->f[k].line);
            expect_int_eq(fr[k].start_line, a->f[k].start_line);
            expect_true(fr[k].sym_start == a->f[k].sym_start);
        }
    }
    symbols_unlock();
    return named;
}

TEST(answers_survive_release)
{
    uintptr_t q = (uintptr_t)dlsym(RTLD_DEFAULT, "qsort");
    assert_true(q != 0);
    symbols_lock();
    symbols_refresh();
    int mi = symbols_mapping_index(q);
    const struct sym_mapping *m = mi >= 0 ? symbols_mapping_at((size_t)mi) : NULL;
    uintptr_t start = m ? m->start : 0, limit = m ? m->limit : 0;
    symbols_unlock();
    assert_true(m != NULL);
    uintptr_t step = (limit - start) / (NADDR - 1);
    for (int i = 0; i < NADDR - 1; i++)
        addrs[i] = start + (uintptr_t)i * step + 1;
    addrs[NADDR - 1] = (uintptr_t)&release_test_fn + 2;

    int named = pass(first);
    expect_true(named > NADDR / 3);
    expect_true(first[NADDR - 1].n >= 1 &&
                same_str(first[NADDR - 1].f[0].name, "release_test_fn") &&
                first[NADDR - 1].f[0].line > 0);

    /* From the cache, after the objects gave back their tables. */
    symbols_release();
    expect_int_eq(pass(NULL), named);

    /* The mappings re-read: the cache is emptied and every object loads
     * its tables, debug file and DWARF again. */
    objects_changed();
    expect_int_eq(pass(NULL), named);
    symbols_release();
    symbols_release(); /* nothing held: no effect */
    objects_changed();
    expect_int_eq(pass(NULL), named);
    symbols_release();
    expect_int_eq(release_test_fn(3), 6);
}

int main(void)
{
    return run_tests(answers_survive_release, NULL);
}
