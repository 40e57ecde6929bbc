/*
 * CPU-bound host for the unwind bench: recurses DEPTH levels, then spins
 * for ROUNDS rounds of a multiply loop at the bottom, so that every CPU
 * sample walks DEPTH + 5 frames (the spin, the recursion, main, the C
 * library's two start frames, _start).
 *
 *   deep_spin DEPTH ROUNDS
 */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void spin(long rounds)
{
    unsigned long x = sink;
    for (long r = 0; r < rounds; r++)
        for (int i = 0; i < 100000; i++)
            x = x * 2862933555777941757ULL + 3037000493ULL;
    sink = x;
}

__attribute__((noinline)) static void recurse(int depth, long rounds)
{
    if (depth > 0)
        recurse(depth - 1, rounds);
    else
        spin(rounds);
    __asm__ volatile("" ::: "memory"); /* no tail call: one frame a level */
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: deep_spin DEPTH ROUNDS\n");
        return 2;
    }
    recurse(atoi(argv[1]), atol(argv[2]));
    printf("%lu\n", sink);
    return 0;
}
