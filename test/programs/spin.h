/* CPU work that does nothing else (no calls, no memory but one word), for
 * programs whose profile must show where the CPU time went. */
#ifndef SPIN_H
#define SPIN_H

static volatile unsigned long sink;

/* n rounds of a multiply-add (a 64-bit LCG step). */
__attribute__((noinline)) static void spin(long n)
{
    unsigned long x = sink;
    for (long i = 0; i < n; i++)
        x = x * 2862933555777941757ULL + 3037000493ULL;
    sink = x;
}

#endif
