/*
 * Code generated at run time, as a JIT compiler makes it: two functions
 * written into an anonymous executable page, with no call-frame
 * information and in no loaded object. Most of the program's CPU time is
 * spent inside them, so a profiler's samples land there: one keeps the
 * caller's frame pointer, the other pushes it and loads a garbage value
 * into rbp while it loops. A walker must end cleanly there and keep the
 * leaf (test/integration/walk_truth.sh).
 *
 * Runs for SECONDS of wall time and until it used CPU_SECONDS of its own
 * CPU time (0 by default; a loaded machine gives it less CPU in the same
 * time, and the test needs samples), 180 s at most.
 *
 *   walk_jit SECONDS [CPU_SECONDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef long (*spin_fn)(long n);

/* mov rax, rdi; 1: dec rax; jnz 1b; ret */
static const unsigned char keeps_fp[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8,
                                         0x75, 0xfb, 0xc3};
/* push rbp; mov rbp, 0x12345678; mov rax, rdi; 1: dec rax; jnz 1b;
 * pop rbp; ret */
static const unsigned char garbage_fp[] = {
    0x55, 0x48, 0xc7, 0xc5, 0x78, 0x56, 0x34, 0x12, 0x48, 0x89,
    0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0x5d, 0xc3};

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static long call_generated(spin_fn f, long n)
{
    long r = f(n);
    __asm__ volatile("" ::: "memory");
    return r;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 2;
    double cpu = argc > 2 ? atof(argv[2]) : 0;
    unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        return 1;
    memcpy(page, keeps_fp, sizeof keeps_fp);
    memcpy(page + 64, garbage_fp, sizeof garbage_fp);
    if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0)
        return 1;
    spin_fn a = (spin_fn)(void *)page, b = (spin_fn)(void *)(page + 64);
    double start = clock_s(CLOCK_MONOTONIC);
    long sum = 0;
    for (;;) {
        double t = clock_s(CLOCK_MONOTONIC) - start;
        if (t >= 180 || (t >= seconds && clock_s(CLOCK_PROCESS_CPUTIME_ID) >= cpu))
            break;
        sum += call_generated(a, 2000000) + call_generated(b, 2000000);
    }
    printf("walk_jit done %d\n", sum == 0); /* each call counts down to 0 */
    return 0;
}
