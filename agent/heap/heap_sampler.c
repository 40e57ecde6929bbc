/*
 * The per-thread heap sampler: a Poisson process over the bytes each thread
 * allocates (agent/heap/heap.h has the maths). The fast path in malloc_hooks.c
 * only subtracts from heap_tls.left; this file is entered when an
 * allocation reaches the next sample point, or on a thread's first
 * allocation, to seed the generator and draw the next distance.
 *
 * Runs inside interposed allocation calls on any host thread. It must never
 * allocate, take a lock or call into libm or another library (the
 * logarithm is computed here), because it runs before anything else in the
 * slow path and before the constructor.
 */
#include "agent/config.h"
#include "agent/heap/heap.h"

#include <time.h>

__thread struct heap_tls heap_tls __attribute__((tls_model("initial-exec")));

int heap_enabled;

double heap_sampler_log(double x)
{
    /* x = m * 2^e with m in [sqrt(1/2), sqrt(2)); then
     * ln m = 2 atanh(s) with s = (m - 1) / (m + 1), |s| < 0.172, whose
     * series to s^13 is exact to about 1e-12. */
    union {
        double d;
        uint64_t u;
    } v = {x};
    int e = (int)((v.u >> 52) & 0x7ff) - 1023;
    v.u = (v.u & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
    double m = v.d;
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    double s = (m - 1.0) / (m + 1.0);
    double s2 = s * s;
    double series =
        1.0 + s2 * (1.0 / 3 +
                    s2 * (1.0 / 5 +
                          s2 * (1.0 / 7 +
                                s2 * (1.0 / 9 + s2 * (1.0 / 11 + s2 / 13)))));
    return 2.0 * s * series + (double)e * 0.6931471805599453;
}

uint64_t heap_sampler_draw(uint64_t *rng, long rate)
{
    if (rate <= 1)
        return 1;
    /* u is uniform in (0, 1): 53 random bits, centred in their interval. */
    double u = ((double)(rand_next(rng) >> 11) + 0.5) * 0x1p-53;
    double d = -heap_sampler_log(u) * (double)rate;
    if (d > 0x1p62)
        d = 0x1p62;
    /* floor(E) + 1: an allocation that brings the byte count past E is
     * the one that holds the sample point, see heap_sampler_take. */
    return (uint64_t)d + 1;
}

static uint64_t seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t z = (uint64_t)(uintptr_t)&heap_tls ^
                 ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec;
    return rand_seed(z); /* nearby threads start far apart */
}

int heap_sampler_take(size_t n)
{
    struct heap_tls *t = &heap_tls;
    int state = __atomic_load_n(&heap_enabled, __ATOMIC_RELAXED);
    if (state <= 0) {
        /* Off for good: the fast path will never come back here. Before
         * the constructor: left stays 0 and the next call asks again. */
        if (state < 0)
            t->left = UINT64_MAX;
        return 0;
    }
    if (opt_heap_rate == 1)
        return 1; /* every allocation; left stays 0 */

    /* The fast path counts n + 1 bytes and comes here when that exceeds
     * left: the sample point lies inside this allocation. A draw d puts
     * the point in the allocation that brings the count to d, so left,
     * the bytes allowed before it, is d - 1. */
    uint64_t need = (uint64_t)n + 1;
    if (t->rng == 0) {
        t->rng = seed();
        t->left = heap_sampler_draw(&t->rng, opt_heap_rate) - 1;
        if (need <= t->left) {
            t->left -= need;
            return 0;
        }
    }
    t->left = heap_sampler_draw(&t->rng, opt_heap_rate) - 1;
    return 1;
}
