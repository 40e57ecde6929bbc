/*
 * Unit tests for the mutex charges' sampling (agent/locks/contention.c): a
 * followed waiter is overtaken by many unlockers, each charged a short
 * share of its delay; the captures must follow the delay, not the number
 * of unlocks, and the recorded totals must stay the true ones on average.
 */
#include "agent/config.h"
#include "agent/locks/contention.h"
#include "agent/stacks/stack.h"

#include "harness.h"

/* contention_init() resolves the interposers' real functions; their files
 * stay out of the unit tests' archive. */
void lock_hooks_init(void) {}
void wait_hooks_init(void) {}
void futex_hooks_init(void) {}

#define QUANTUM 100000 /* ns, as contention.c */

/* within PERCENT: |got - want| <= want * percent / 100 */
static int within(double got, double want, double percent)
{
    double d = got - want;
    return (d < 0 ? -d : d) <= want * percent / 100;
}

TEST(long_charges_are_kept_as_they_are)
{
    int64_t d = 3 * QUANTUM, c = 2;
    expect_int_eq(contention_charge_sample(&d, &c), 1);
    expect_int_eq(d, 3 * QUANTUM);
    expect_int_eq(c, 2);
}

TEST(short_charges_are_unbiased)
{
    /* 1e6 charges of 3 us for 2 waiters: about 3% recorded (30000, sd
     * 171), each weighted so that delay and count add up to the truth. */
    long n = 1000000, recorded = 0;
    double delay = 0, count = 0;
    for (long i = 0; i < n; i++) {
        int64_t d = 3000, c = 2;
        if (contention_charge_sample(&d, &c)) {
            recorded++;
            delay += (double)d;
            count += (double)c;
        }
    }
    printf("# %ld of %ld recorded, delay %.0f (true %.0f), count %.0f "
           "(true %.0f)\n",
           recorded, n, delay, 3000.0 * n, count, 2.0 * n);
    expect_true(within((double)recorded, n * 3000.0 / QUANTUM, 5));
    expect_true(within(delay, 3000.0 * n, 5));
    expect_true(within(count, 2.0 * n, 5));
}

TEST(captures_follow_the_delay_not_the_unlocks)
{
    /* One followed waiter on a lock, 200000 unlockers charged in turn:
     * each takes what accrued since the previous charge (tens of ns). */
    static int lock;
    int64_t t0 = contention_clock();
    void *h = contention_arrive(&lock, t0);
    assert_true(h != NULL);
    long charges = 200000, recorded = 0;
    double delay = 0;
    for (long i = 0; i < charges; i++) {
        int64_t d, c;
        if (contention_charge(&lock, contention_stamp(), &d, &c)) {
            recorded++;
            delay += (double)d;
        }
    }
    int64_t t1 = contention_clock();
    contention_leave(h, t1);
    double waited = (double)(t1 - t0);
    printf("# %ld charges, %ld recorded, %.0f ns recorded of %.0f waited\n",
           charges, recorded, delay, waited);
    /* At most the delay over the quantum, with room for chance. */
    expect_true(recorded <= 2 * waited / QUANTUM + 20);
    /* The total within 6 standard deviations (sqrt(waited * quantum)). */
    double sd = __builtin_sqrt(waited * QUANTUM);
    expect_true(delay >= waited - 6 * sd && delay <= waited + 6 * sd);
}

int main(void)
{
    opt_mutex_fraction = 1;
    opt_block_rate = 0;
    stack_init();
    contention_init();
    return run_tests(long_charges_are_kept_as_they_are,
                     short_charges_are_unbiased,
                     captures_follow_the_delay_not_the_unlocks, NULL);
}
