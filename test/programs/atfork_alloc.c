/*
 * A program with its own malloc, whose lock its pthread_atfork prepare
 * handler takes and its child handler releases, as PartitionAlloc, a
 * statically linked jemalloc or mimalloc do, for
 * test/integration/host_lifecycle.sh:
 *
 *   atfork_alloc N    forks N children one after the other; each allocates,
 *                     prints and exits 0; a child that does not end within
 *                     30 s is killed and reported "stuck" (and no more
 *                     are forked); prints "forks=N ok=N" and exits 0 when
 *                     every child did
 *
 * The executable defines malloc and its kin, so the C library and every
 * library loaded (the agent too) allocate here.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "reap.h"

/* ---- the program's own allocator ---------------------------------------- */

/* A bump allocator on a static arena, one lock, a 16-byte header holding
 * the size (for realloc). free() keeps nothing: the modes allocate little. */
static char arena[64 << 20] __attribute__((aligned(64)));
static size_t arena_used;
static int alloc_lock;

static void lock_take(void)
{
    while (__atomic_exchange_n(&alloc_lock, 1, __ATOMIC_ACQUIRE))
        sched_yield();
}

static void lock_give(void)
{
    __atomic_store_n(&alloc_lock, 0, __ATOMIC_RELEASE);
}

static void *bump(size_t size, size_t align)
{
    if (align < 16)
        align = 16;
    lock_take();
    size_t at = (arena_used + 16 + align - 1) & ~(align - 1);
    void *p = NULL;
    if (at + size <= sizeof arena) {
        arena_used = at + size;
        *(size_t *)(arena + at - 16) = size;
        p = arena + at;
    }
    lock_give();
    if (!p)
        errno = ENOMEM;
    return p;
}

void *malloc(size_t size)
{
    return bump(size, 16);
}

void free(void *p)
{
    (void)p;
}

void *calloc(size_t n, size_t size)
{
    if (size && n > (size_t)-1 / size)
        return NULL;
    return bump(n * size, 16); /* the arena is zero and never reused */
}

size_t malloc_usable_size(void *p)
{
    return p ? *(size_t *)((char *)p - 16) : 0;
}

void *realloc(void *p, size_t size)
{
    void *q = bump(size, 16);
    if (q && p) {
        size_t old = malloc_usable_size(p);
        memcpy(q, p, old < size ? old : size);
    }
    return q;
}

void *memalign(size_t align, size_t size)
{
    return bump(size, align);
}

void *aligned_alloc(size_t align, size_t size)
{
    return bump(size, align);
}

int posix_memalign(void **out, size_t align, size_t size)
{
    void *p = bump(size, align);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

/* ---- the fork handlers and the forks ------------------------------------ */

static void atfork_prepare(void)
{
    lock_take();
}

static void atfork_parent(void)
{
    lock_give();
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_atfork(atfork_prepare, atfork_parent, atfork_parent);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            char *p = malloc(100);
            snprintf(p, 100, "child %d allocated", i);
            puts(p);
            exit(0);
        }
        char what[32];
        snprintf(what, sizeof what, "child %d", i);
        if (pid < 0 || reap(pid, what) != 0)
            break; /* one stuck child is enough */
        ok++;
    }
    printf("forks=%d ok=%d\n", n, ok);
    return ok == n ? 0 : 1;
}

