/*
 * The C library's functions for the agent's own code (agent/core/real.h
 * has the contract and which function each name reaches).
 *
 * Each name is resolved at its first call: the process's definition
 * (first_symbol) unless it lies in the agent itself, else the next one
 * (next_symbol). Both read the loader's hash tables, without a lock or an
 * allocation; two threads resolving at once store the same address. The
 * names the agent's signal handlers call are resolved before any of them
 * is installed (real_init), so that no handler ever resolves one.
 *
 * This file and the doors are the only ones that name the interposed
 * functions (test/integration/doors.sh): it is where the rest of the
 * agent finds them.
 */
#include "agent/core/real.h"

#include "agent/compiler.h"
#include "agent/core/next_symbol.h"

#include <stdarg.h>
#include <stdint.h>

/* The agent's own object, from its ELF header to its end. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char _end[] __attribute__((visibility("hidden")));

static int in_agent(const void *p)
{
    return (uintptr_t)p - (uintptr_t)__ehdr_start <
           (uintptr_t)_end - (uintptr_t)__ehdr_start;
}

/* The function the agent's own calls of name reach. */
STARTUP static void *resolve(const char *name)
{
    void *bound = first_symbol(name);
    return bound && !in_agent(bound) ? bound : next_symbol(name);
}

/* Each name's pointer starts at a stub that resolves it, stores the
 * answer and calls it; real_<name> is then one jump through the pointer.
 * Every thread that resolves stores the same address. */
#define REAL_FN(ret, name, params, args)                                    \
    static ret stub_##name params;                                          \
    static ret(*next_##name) params = stub_##name;                          \
    ret real_##name params                                                  \
    {                                                                       \
        return __atomic_load_n(&next_##name, __ATOMIC_RELAXED) args;        \
    }                                                                       \
    STARTUP static ret stub_##name params                                   \
    {                                                                       \
        ret(*f) params = (ret(*) params)resolve(#name);                     \
        __atomic_store_n(&next_##name, f, __ATOMIC_RELAXED);                \
        return f args;                                                      \
    }

REAL_FN(int, pthread_join, (pthread_t t, void **ret), (t, ret))
REAL_FN(int, pthread_setname_np, (pthread_t t, const char *name), (t, name))
REAL_FN(int, pthread_mutex_lock, (pthread_mutex_t *m), (m))
REAL_FN(int, pthread_mutex_trylock, (pthread_mutex_t *m), (m))
REAL_FN(int, pthread_mutex_unlock, (pthread_mutex_t *m), (m))
/* The condition waits are the C library's current ones (GLIBC_2.3.2 on
 * x86_64): a lookup without a version takes the default version, never
 * the old compatibility one, whose waits miss the current
 * pthread_cond_signal's wakeups (an attached agent's references bound
 * that one when they named no version). */
REAL_FN(int, pthread_cond_wait, (pthread_cond_t *c, pthread_mutex_t *m),
        (c, m))
REAL_FN(int, pthread_cond_timedwait,
        (pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *until),
        (c, m, until))
REAL_FN(int, poll, (struct pollfd *fds, nfds_t n, int timeout),
        (fds, n, timeout))
REAL_FN(int, connect, (int fd, const struct sockaddr *addr, socklen_t len),
        (fd, addr, len))
REAL_FN(int, fsync, (int fd), (fd))
REAL_FN(int, usleep, (useconds_t us), (us))
REAL_FN(unsigned, sleep, (unsigned s), (s))
REAL_FN(int, setuid, (uid_t uid), (uid))
REAL_FN(int, setgid, (gid_t gid), (gid))
REAL_FN(int, setgroups, (size_t n, const gid_t *groups), (n, groups))
REAL_FN(ssize_t, read, (int fd, void *buf, size_t n), (fd, buf, n))
REAL_FN(ssize_t, write, (int fd, const void *buf, size_t n), (fd, buf, n))
REAL_FN(ssize_t, pwrite, (int fd, const void *buf, size_t n, off_t at),
        (fd, buf, n, at))
REAL_FN(int, nanosleep, (const struct timespec *req, struct timespec *rem),
        (req, rem))
REAL_FN(int, clock_nanosleep,
        (clockid_t clock, int flags, const struct timespec *req,
         struct timespec *rem),
        (clock, flags, req, rem))
REAL_FN(int, pthread_sigmask,
        (int how, const sigset_t *set, sigset_t *old), (how, set, old))

/* The variadic two take their arguments as the C library's do: syscall
 * six words after the number (the kernel reads as many as the call has),
 * prctl four. Reading a word the caller did not pass reads a register or
 * a stack slot of its frame, as the C library's own syscall does. */
static void *next_syscall, *next_prctl;

/* *slot, resolved from name at the first call. */
static void *resolved(void **slot, const char *name)
{
    void *f = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (unlikely(!f)) {
        f = resolve(name);
        __atomic_store_n(slot, f, __ATOMIC_RELAXED);
    }
    return f;
}

long real_syscall(long nr, ...)
{
    long (*f)(long, ...) = (long (*)(long, ...))resolved(&next_syscall, "syscall");
    long a[6];
    va_list ap;
    va_start(ap, nr);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    return f(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int real_prctl(int option, ...)
{
    int (*f)(int, ...) = (int (*)(int, ...))resolved(&next_prctl, "prctl");
    unsigned long a[4];
    va_list ap;
    va_start(ap, option);
    for (int i = 0; i < 4; i++)
        a[i] = va_arg(ap, unsigned long);
    va_end(ap);
    return f(option, a[0], a[1], a[2], a[3]);
}

/* pthread_create as the process binds it, the agent's door included: the
 * door marks the threads the agent starts as its own (thread_hooks.c). */
static int (*bound_pthread_create)(pthread_t *, const pthread_attr_t *,
                                   void *(*)(void *), void *);

int real_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                        void *(*fn)(void *), void *arg)
{
    __typeof__(bound_pthread_create) f =
        __atomic_load_n(&bound_pthread_create, __ATOMIC_RELAXED);
    if (unlikely(!f)) {
        f = (__typeof__(f))first_symbol("pthread_create");
        __atomic_store_n(&bound_pthread_create, f, __ATOMIC_RELAXED);
    }
    return f(t, attr, fn, arg);
}

/* ---- the malloc family ------------------------------------------------------ */

/* The door's side (agent/heap/malloc_hooks.c puts a pointer to it in this
 * section; the linker names the section's bounds). Absent from the unit
 * tests' archive, which links no door: the bounds are then 0. */
extern const struct real_allocator *const __start_pprof_real_allocator[]
    __attribute__((weak, visibility("hidden")));
extern const struct real_allocator *const __stop_pprof_real_allocator[]
    __attribute__((weak, visibility("hidden")));

static const struct real_allocator *door_allocator(void)
{
    const struct real_allocator *const *start = __start_pprof_real_allocator;
    return start != __stop_pprof_real_allocator ? start[0] : NULL;
}

/* The process's allocator: the agent's door's side where the process's
 * malloc is the agent's own, else the process's definitions. The same
 * answer on every thread and at every call: the first definition in the
 * loader's list does not change as objects are loaded after it. */
STARTUP static struct real_allocator allocator_resolve(void)
{
    void *m = first_symbol("malloc");
    if (m && in_agent(m) && door_allocator())
        return *door_allocator();
    struct real_allocator a = {
        m ? m : next_symbol("malloc"),
        m ? first_symbol("free") : next_symbol("free"),
        m ? first_symbol("calloc") : next_symbol("calloc"),
        m ? first_symbol("realloc") : next_symbol("realloc"),
    };
    return a;
}

static void *stub_malloc(size_t n);
static void stub_free(void *p);
static void *stub_calloc(size_t a, size_t b);
static void *stub_realloc(void *p, size_t n);

/* The pointers real_malloc and the others jump through: the stubs until
 * the allocator is known. */
static struct real_allocator current = {
    stub_malloc, stub_free, stub_calloc, stub_realloc,
};

/* Each thread that calls before the pointers are set resolves the
 * allocator itself and stores the same four addresses: no thread waits
 * for another, so a child forked meanwhile never inherits a resolution
 * half done (blocks of two allocators never meet: there is one answer). */
STARTUP static const struct real_allocator *the_allocator(void)
{
    struct real_allocator a = allocator_resolve();
    __atomic_store_n(&current.malloc, a.malloc, __ATOMIC_RELAXED);
    __atomic_store_n(&current.free, a.free, __ATOMIC_RELAXED);
    __atomic_store_n(&current.calloc, a.calloc, __ATOMIC_RELAXED);
    __atomic_store_n(&current.realloc, a.realloc, __ATOMIC_RELAXED);
    return &current;
}

STARTUP static void *stub_malloc(size_t n)
{
    return the_allocator()->malloc(n);
}

STARTUP static void stub_free(void *p)
{
    the_allocator()->free(p);
}

STARTUP static void *stub_calloc(size_t a, size_t b)
{
    return the_allocator()->calloc(a, b);
}

STARTUP static void *stub_realloc(void *p, size_t n)
{
    return the_allocator()->realloc(p, n);
}

void *real_malloc(size_t n)
{
    return __atomic_load_n(&current.malloc, __ATOMIC_RELAXED)(n);
}

void real_free(void *p)
{
    __atomic_load_n(&current.free, __ATOMIC_RELAXED)(p);
}

void *real_calloc(size_t a, size_t b)
{
    return __atomic_load_n(&current.calloc, __ATOMIC_RELAXED)(a, b);
}

void *real_realloc(void *p, size_t n)
{
    return __atomic_load_n(&current.realloc, __ATOMIC_RELAXED)(p, n);
}

STARTUP void real_init(void)
{
    resolved(&next_syscall, "syscall");
    if (next_write == stub_write)
        next_write = (ssize_t (*)(int, const void *, size_t))resolve("write");
}
