/*
 * A tiny test harness in jemalloc's shape: expect_* reports and goes on,
 * assert_* reports and stops the test. Each unit test file is one program;
 * test/run-tests runs it in its own process with a timeout and reads its
 * exit status (0: every check passed).
 *
 *   TEST(name) { expect_int_eq(1 + 1, 2); }
 *   int main(void) { return run_tests(name, other, NULL); }
 */
#ifndef PPROF_TEST_HARNESS_H
#define PPROF_TEST_HARNESS_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int harness_failures;

#define TEST(name) static void name(void)

#define HARNESS_FAIL(...)                                                      \
    do {                                                                       \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);                      \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
        harness_failures++;                                                    \
    } while (0)

#define expect_true(c)                                                         \
    do {                                                                       \
        if (!(c))                                                              \
            HARNESS_FAIL("expected %s", #c);                                   \
    } while (0)

#define expect_int_eq(a, b)                                                    \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        if (a_ != b_)                                                          \
            HARNESS_FAIL("%s == %lld, expected %s == %lld", #a, a_, #b, b_);   \
    } while (0)

#define expect_str_eq(a, b)                                                    \
    do {                                                                       \
        const char *a_ = (a), *b_ = (b);                                       \
        if (!a_ || !b_ || strcmp(a_, b_) != 0)                                 \
            HARNESS_FAIL("%s == \"%s\", expected \"%s\"", #a,                  \
                         a_ ? a_ : "(null)", b_ ? b_ : "(null)");              \
    } while (0)

#define expect_mem_eq(a, b, n)                                                 \
    do {                                                                       \
        if (memcmp((a), (b), (n)) != 0)                                        \
            HARNESS_FAIL("%s differs from %s in its first %zu bytes", #a, #b,  \
                         (size_t)(n));                                         \
    } while (0)

#define assert_true(c)                                                         \
    do {                                                                       \
        if (!(c)) {                                                            \
            HARNESS_FAIL("assertion %s failed", #c);                           \
            return;                                                            \
        }                                                                      \
    } while (0)

typedef void (*harness_fn)(void);

static inline int run_tests_impl(const char *names, harness_fn *fns)
{
    char list[4096];
    snprintf(list, sizeof list, "%s", names);
    char *save = NULL;
    char *name = strtok_r(list, ", ", &save);
    for (int i = 0; fns[i]; i++) {
        int before = harness_failures;
        fns[i]();
        fprintf(stderr, "  %s %s\n", harness_failures == before ? "ok  " : "FAIL",
                name ? name : "?");
        name = strtok_r(NULL, ", ", &save);
    }
    return harness_failures ? 1 : 0;
}

#define run_tests(...)                                                         \
    run_tests_impl(#__VA_ARGS__, (harness_fn[]){__VA_ARGS__})

#endif
