/*
 * Unit tests for the heap sampler and the live-allocation table: the
 * logarithm against libm, the sampling distance's distribution, the
 * unsampling factor, and the table's exactness (every tracked pointer
 * found once, through growth and deletions in random order, the filter
 * back to zero at the end).
 */
#include "agent/heap.h"
#include "encoder/encoder.h"
#include "harness.h"

#include <math.h>

TEST(log_matches_libm)
{
    double worst = 0;
    for (double x = 1e-16; x < 1.0; x *= 1.0001) {
        double err = fabs(heap_sampler_log(x) - log(x)) / fabs(log(x) ? log(x) : 1);
        if (err > worst)
            worst = err;
    }
    expect_true(worst < 1e-11);
    expect_true(fabs(heap_sampler_log(1.0)) < 1e-15);
}

TEST(draw_is_exponential)
{
    /* Mean R and P(draw <= R) = 1 - 1/e: the sampler counts n + 1 bytes and
     * samples when the draw is <= n + 1, so this is the probability that an
     * allocation of R - 1 bytes is sampled. */
    const long rate = 524288;
    const int n = 1000000;
    uint64_t rng = 0x1234567887654321ULL;
    double sum = 0;
    long below = 0;
    for (int i = 0; i < n; i++) {
        uint64_t d = heap_sampler_draw(&rng, rate);
        sum += (double)d;
        below += d <= (uint64_t)rate;
    }
    double mean = sum / n;
    /* SD of the mean of n exponentials is R / sqrt(n) = 0.1% of R. */
    expect_true(fabs(mean - rate) < 4.0 * rate / sqrt(n));
    double p = 1 - exp(-1.0);
    double sd = sqrt(p * (1 - p) / n);
    expect_true(fabs((double)below / n - p) < 4 * sd);
    expect_int_eq(heap_sampler_draw(&rng, 1), 1);
}

TEST(scale_is_inverse_probability)
{
    double s = heap_scale(1000, 524288);
    expect_true(fabs(s - 1.0 / (1.0 - exp(-1001.0 / 524288))) < 1e-9 * s);
    expect_true(heap_scale(0, 524288) > 524288 * 0.999);
    expect_true(heap_scale(1 << 30, 524288) == 1.0);
    expect_true(heap_scale(12345, 1) == 1.0);
}

#define NPTRS 60000

static uintptr_t ptrs[NPTRS];

TEST(table_is_exact)
{
    assert_true(heap_table_init() == 0);
    for (int i = 0; i < NPTRS; i++) {
        ptrs[i] = 0x7f0000000000ULL + (uintptr_t)i * 48;
        heap_table_sample((void *)ptrs[i], (size_t)(i % 7) * 100);
    }
    struct heap_stats st;
    heap_table_stats(&st);
    expect_int_eq(st.live, NPTRS);
    expect_int_eq(st.lost, 0);
    for (int i = 0; i < NPTRS; i++)
        expect_true(heap_filter_maybe((void *)ptrs[i]) != 0);

    /* Delete in a shuffled order: backward-shift deletion must keep every
     * remaining entry reachable. */
    uint64_t x = 88172645463325252ULL;
    for (int i = NPTRS - 1; i > 0; i--) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int j = (int)(x % (uint64_t)(i + 1));
        uintptr_t t = ptrs[i];
        ptrs[i] = ptrs[j];
        ptrs[j] = t;
    }
    long found = 0, size_ok = 0;
    for (int i = 0; i < NPTRS; i++) {
        struct heap_live l;
        if (heap_table_forget((void *)ptrs[i], &l)) {
            found++;
            size_t idx = (ptrs[i] - 0x7f0000000000ULL) / 48;
            size_ok += l.size == (idx % 7) * 100;
            heap_table_count_free(&l);
        }
        struct heap_live again;
        expect_int_eq(heap_table_forget((void *)ptrs[i], &again), 0);
    }
    expect_int_eq(found, NPTRS);
    expect_int_eq(size_ok, NPTRS);
    heap_table_stats(&st);
    expect_int_eq(st.live, 0);
    long nonzero = 0;
    for (size_t i = 0; i < (1u << HEAP_FILTER_BITS); i++)
        nonzero += heap_filter[i] != 0;
    expect_int_eq(nonzero, 0);

    /* Every bucket's frees match its allocations. */
    int64_t allocs = 0, frees = 0;
    for (struct stack_entry *e = stack_table_first(heap_buckets); e;
         e = e->next_all) {
        allocs += stack_entry_value(e, HEAP_ALLOC_OBJECTS);
        frees += stack_entry_value(e, HEAP_FREE_OBJECTS);
        expect_int_eq(stack_entry_value(e, HEAP_ALLOC_BYTES),
                      stack_entry_value(e, HEAP_FREE_BYTES));
    }
    expect_int_eq(allocs, NPTRS);
    expect_int_eq(frees, NPTRS);
}

int main(void)
{
    stack_init();
    return run_tests(log_matches_libm, draw_is_exponential,
                     scale_is_inverse_probability, table_is_exact, NULL);
}
