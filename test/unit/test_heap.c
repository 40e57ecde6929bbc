/*
 * Unit tests for the heap sampler and the live-allocation table: the
 * logarithm against libm, the sampling distance's distribution, the
 * unsampling factor, and the table's exactness (every tracked pointer
 * found once, through growth and deletions in random order, the filter
 * back to zero at the end); the samples' ages and the in-use estimate, and
 * the records min_age and the age labels are built from.
 */
#include "agent/config.h"
#include "agent/heap/heap.h"
#include "agent/stacks/stack.h"
#include "agent/stacks/stack_table.h"
#include "encoder/encoder.h"
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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
        heap_table_sample((void *)ptrs[i], (size_t)(i % 7) * 100, NULL);
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

/* After table_is_exact (which creates the table): every sample carries
 * when it was taken, the estimate is the sum of the weights, and the
 * records for min_age, age labels and deltas count what they should. */
/* A filter cell counts up to HEAP_FILTER_FULL and then stays: more marks
 * than that never wrap it to zero (a missed free), and unmarks leave a full
 * cell full (a false positive only). */
TEST(filter_saturates)
{
    void *p = (void *)(uintptr_t)0x7f0000001000ull;
    uint8_t *cell = &heap_filter[heap_filter_index(p)];
    expect_int_eq(*cell, 0);
    heap_filter_mark(p);
    heap_filter_mark(p);
    expect_int_eq(*cell, 2);
    heap_filter_unmark(p);
    expect_int_eq(*cell, 1);
    heap_filter_unmark(p);
    expect_int_eq(*cell, 0);
    heap_filter_unmark(p); /* more unmarks than marks: stays at zero */
    expect_int_eq(*cell, 0);
    for (int i = 0; i < 300; i++)
        heap_filter_mark(p);
    expect_int_eq(*cell, HEAP_FILTER_FULL);
    for (int i = 0; i < 300; i++)
        heap_filter_unmark(p);
    expect_int_eq(*cell, HEAP_FILTER_FULL);
    *cell = 0; /* the other tests count on an empty filter */
}

TEST(ages_and_estimate)
{
    int64_t before = heap_table_now_ns();
    uintptr_t base = 0x7e0000000000ULL;
    int64_t want = 0;
    for (int i = 0; i < 10; i++) {
        size_t size = i < 6 ? 1000 : 3000000;
        heap_table_sample((void *)(base + (uintptr_t)i * 64), size, NULL);
        want += (int64_t)heap_table_weight(size);
    }
    int64_t after = heap_table_now_ns();
    expect_int_eq(heap_inuse_estimate(), want);
    /* The weight is size / p: about the rate for small blocks, the size
     * itself for blocks far larger than the rate. */
    expect_true(fabs((double)heap_table_weight(1000) -
                     1000.0 / -expm1(-1001.0 / (double)opt_heap_rate)) < 1);
    expect_int_eq(heap_table_weight(3000000) >= 3000000, 1);

    struct heap_live *live = NULL;
    size_t n = 0;
    assert_true(heap_table_live(&live, &n) == 0);
    expect_int_eq(n, 10);
    long in_time = 0;
    for (size_t i = 0; i < n; i++)
        in_time += live[i].born_ns >= before && live[i].born_ns <= after;
    expect_int_eq(in_time, 10);

    /* Pretend the small ones were sampled 2 minutes ago. */
    for (size_t i = 0; i < n; i++)
        if (live[i].size == 1000)
            live[i].born_ns -= 120000000000LL;
    struct heap_record recs[32];
    size_t m = heap_records_min_age(live, n, after, 60000000000LL, 1, recs);
    expect_int_eq(m, 1);
    expect_int_eq(recs[0].alloc_objects, 6);
    expect_int_eq(recs[0].size, 1000);
    expect_true(recs[0].age && strcmp(recs[0].age, "1m-10m") == 0);
    m = heap_records_min_age(live, n, after, 0, 0, recs);
    expect_int_eq(m, 2);

    /* A delta: 2 more old small blocks, the large ones gone. */
    struct heap_record later[32];
    size_t nl = heap_records_min_age(live, n, after, 0, 0, later);
    for (size_t i = 0; i < nl; i++)
        later[i].alloc_objects = later[i].size == 1000 ? 8 : 0;
    nl = heap_records_subtract(later, nl, recs, m);
    int64_t small = 0, large = 0;
    for (size_t i = 0; i < nl; i++)
        *(later[i].size == 1000 ? &small : &large) += later[i].alloc_objects;
    expect_int_eq(small, 2);
    expect_int_eq(large, -4);

    /* Age labels on full records: the bucket keeps its allocations and
     * nothing in use; each age bucket holds only in-use samples. */
    struct heap_record full[2];
    for (int k = 0; k < 2; k++) {
        full[k] = recs[k];
        full[k].alloc_objects = k == 0 ? 9 : 4; /* 3 small ones freed */
        full[k].free_objects = k == 0 ? 3 : 0;
    }
    struct heap_record split[2 * (HEAP_AGE_BUCKETS + 1)];
    size_t ns = heap_records_by_age(full, 2, live, n, after, split);
    int64_t alloc = 0, inuse = 0, aged_alloc = 0;
    for (size_t i = 0; i < ns; i++) {
        alloc += split[i].alloc_objects;
        inuse += split[i].alloc_objects - split[i].free_objects;
        if (split[i].age)
            aged_alloc += split[i].alloc_objects;
        else
            expect_int_eq(split[i].alloc_objects - split[i].free_objects, 0);
    }
    expect_int_eq(alloc, 13);
    expect_int_eq(inuse, 10);
    expect_int_eq(aged_alloc, 0);
    expect_int_eq(ns, 4); /* two buckets, each with one age bucket */
    expect_true(strcmp(heap_age_label(59999999999LL), "0-1m") == 0);
    expect_true(strcmp(heap_age_label(3600000000000LL), "1h+") == 0);
    free(live);

    for (int i = 0; i < 10; i++) {
        struct heap_live l;
        if (heap_table_forget((void *)(base + (uintptr_t)i * 64), &l))
            heap_table_count_free(&l);
    }
    expect_int_eq(heap_inuse_estimate(), 0);
}

/* The peak: 5 blocks of one bucket live at the high, 3 freed since; the
 * bucket shows 5 at the peak, and 2 after a reset (fails when the counts
 * are not saved before the frees change them). */
TEST(peak_is_kept)
{
    uintptr_t base = 0x7d0000000000ULL;
    /* A new period: the previous test's high was larger. */
    struct stack_snapshot first;
    assert_true(stack_table_snapshot(heap_buckets, &first) == 0);
    struct heap_peak_info first_info;
    heap_peak_apply(&first, &first_info, 1);
    stack_snapshot_free(&first);
    for (int i = 0; i < 5; i++)
        heap_table_sample((void *)(base + (uintptr_t)i * 64), 777, NULL);
    for (int i = 0; i < 3; i++) {
        struct heap_live l;
        assert_true(heap_table_forget((void *)(base + (uintptr_t)i * 64), &l));
        heap_table_count_free(&l);
    }
    for (int reset = 0; reset < 3; reset++) {
        struct stack_snapshot snap;
        assert_true(stack_table_snapshot(heap_buckets, &snap) == 0);
        struct heap_peak_info info;
        heap_peak_apply(&snap, &info, reset == 1);
        int64_t at_peak = 0;
        for (size_t i = 0; i < snap.n; i++)
            if (heap_key_size(snap.entries[i]->key) == 777)
                at_peak += snap.values[i * (size_t)snap.nvalues +
                                       HEAP_ALLOC_OBJECTS];
        expect_int_eq(at_peak, reset < 2 ? 5 : 2);
        stack_snapshot_free(&snap);
    }
    for (int i = 3; i < 5; i++) {
        struct heap_live l;
        if (heap_table_forget((void *)(base + (uintptr_t)i * 64), &l))
            heap_table_count_free(&l);
    }
}

int main(void)
{
    stack_init();
    return run_tests(log_matches_libm, draw_is_exponential, filter_saturates,
                     scale_is_inverse_probability, table_is_exact,
                     ages_and_estimate, peak_is_kept, NULL);
}
