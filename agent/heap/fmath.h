/*
 * The two functions of the C math library the agent needs, so that it
 * does not link libm: one object fewer for the loader to map and relocate
 * in every process the agent is preloaded into, however short-lived (with
 * heap_sampler_log, agent/heap/heap_sampler.c). Pure arithmetic:
 * async-signal-safe, no allocation.
 */
#ifndef PPROF_FMATH_H
#define PPROF_FMATH_H

#include <stdint.h>

/* e^x - 1 for x <= 0 (the chance that an allocation is sampled), to about
 * 1e-15 relative: the series near 0, where e^x - 1 would lose digits;
 * else e^x by range reduction (x = k ln 2 + r, |r| <= ln 2 / 2). */
static inline double fm_expm1_neg(double x)
{
    if (x > -0.5) {
        double term = x, sum = x;
        for (int n = 2; n < 24; n++) {
            term *= x / n;
            sum += term;
        }
        return sum;
    }
    if (x < -700)
        return -1.0;
    const double ln2 = 0.69314718055994530942;
    int k = (int)(x / ln2 - 0.5);
    double r = x - k * ln2;
    double term = 1.0, e = 1.0;
    for (int n = 1; n < 24; n++) {
        term *= r / n;
        e += term;
    }
    union {
        double d;
        uint64_t u;
    } p = {.u = (uint64_t)(1023 + k) << 52};
    return e * p.d - 1.0;
}

/* The square root of x >= 0 (0 for anything else), by Newton's method from
 * an estimate halving the exponent. */
static inline double fm_sqrt(double x)
{
    if (!(x > 0))
        return 0;
    union {
        double d;
        uint64_t u;
    } v = {x};
    v.u = (v.u >> 1) + (0x3ffULL << 51);
    double y = v.d;
    for (int i = 0; i < 6; i++)
        y = 0.5 * (y + x / y);
    return y;
}

#endif
