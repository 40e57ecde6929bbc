/*
 * Code for test_cfi_walk to walk through: built twice as a shared object
 * the test dlopens, once with and once without frame pointers (-O2), so
 * that the walker meets both kinds of frame, a frame whose size is only
 * known at run time (a variable-length array: the compiler then keeps a
 * frame pointer even without -fno-omit-frame-pointer), and the C library's
 * qsort calling back into it.
 */
#include <signal.h>
#include <stdlib.h>

typedef void (*walk_cb)(void);

static volatile int sink;

__attribute__((noinline)) static void use(volatile char *p, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (char)i;
}

/* Two mutually recursive kinds of frame, so that the compiler turns
 * neither into a loop. */
__attribute__((noinline)) static int plain(int depth, walk_cb cb);

__attribute__((noinline)) static int with_vla(int depth, walk_cb cb)
{
    volatile char buf[depth % 13 + 3];
    use(buf, (int)sizeof buf);
    int r = depth == 0 ? (cb(), 0) : plain(depth - 1, cb);
    sink += buf[1];
    return r + 1;
}

__attribute__((noinline)) static int plain(int depth, walk_cb cb)
{
    volatile int local = depth;
    int r = depth == 0 ? (cb(), 0) : with_vla(depth - 1, cb);
    sink += local;
    return r + 2;
}

int walk_recurse(int depth, walk_cb cb)
{
    return plain(depth, cb) + sink;
}

static walk_cb sort_cb;

static int compare_ints(const void *a, const void *b)
{
    if (sort_cb) {
        sort_cb();
        sort_cb = NULL; /* once is enough */
    }
    return *(const int *)a - *(const int *)b;
}

int walk_qsort(walk_cb cb)
{
    int v[16];
    for (int i = 0; i < 16; i++)
        v[i] = (i * 7) % 16;
    sort_cb = cb;
    qsort(v, 16, sizeof v[0], compare_ints);
    return v[0] + sink;
}

/* Raises sig on this thread from two frames down. */
__attribute__((noinline)) static int raise_deeper(int sig, int depth)
{
    volatile int local = depth;
    if (depth > 0)
        return raise_deeper(sig, depth - 1) + local;
    raise(sig);
    return local;
}

int walk_raise(int sig)
{
    return raise_deeper(sig, 2) + sink;
}

/* Spins until *stop: a signal arriving meanwhile interrupts code with no
 * call in flight (the leaf is an ordinary instruction). */
int walk_spin(volatile int *stop)
{
    unsigned x = 1;
    while (!*stop)
        x = x * 1103515245u + 12345u;
    return (int)x;
}

/* A frame whose return address is in a register, as in libgcc's jump to
 * an exception's landing pad: called, it pops its return address into
 * rcx and jumps there. At walk_ra_nop the CFA is the stack pointer and
 * the return address is rcx (test_cfi_walk puts a signal's context
 * there). */
#ifdef __x86_64__
__asm__(".text\n"
        ".globl walk_ra_in_rcx\n"
        ".globl walk_ra_nop\n"
        ".type walk_ra_in_rcx, @function\n"
        "walk_ra_in_rcx:\n"
        ".cfi_startproc\n"
        "    pop %rcx\n"
        ".cfi_adjust_cfa_offset -8\n"
        ".cfi_register rip, rcx\n"
        "walk_ra_nop:\n"
        "    nop\n"
        "    jmp *%rcx\n"
        ".cfi_endproc\n"
        ".size walk_ra_in_rcx, .-walk_ra_in_rcx\n");
#endif
