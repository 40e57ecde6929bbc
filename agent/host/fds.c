/*
 * The descriptors the agent owns, and the interposers that keep them its
 * own: close, close_range, closefrom, dup2, dup3 (the host's side), and
 * pipe2, socket, accept, accept4, recv, send, shutdown (the side of the
 * libraries the agent loads: civetweb and libunwind, told apart by the
 * caller's address). docs/descriptors.md explains the protocol.
 *
 * Daemons close every inherited descriptor at start and reuse the numbers.
 * So every descriptor the agent (or a library working for it) creates is
 * moved to a number near the top of the RLIMIT_NOFILE soft limit, where
 * the kernel's lowest-free rule does not reach while the host has fewer
 * descriptors open than that, and registered: a bit in `watch` plus a
 * slot saying what holds the number. A host's call aimed at a registered
 * number behaves as if the agent were not there: close answers EBADF,
 * close_range and closefrom close everything around it, dup2 and dup3
 * first move the agent's file elsewhere (rewriting its holder) or, where
 * the number lives inside civetweb, give the number up (the agent's later
 * calls on it fail without reaching the host's file).
 *
 * Contexts: every interposer runs on any thread, in signal handlers too
 * (close and dup2 are async-signal-safe): nothing here takes a lock or
 * allocates. The registry is a fixed table of slots claimed and released
 * with atomic operations. The host's fast path (close of a descriptor the
 * agent does not own) is two loads and a branch before the real call.
 */
#include "agent/host/fds.h"
#include "agent/fork_step.h"

#include "agent/threads/blocked.h"
#include "agent/compiler.h"
#include "agent/guard.h"
#include "agent/log.h"
#include "agent/core/next_symbol.h"
#include "agent/stacks/objects.h"
#include "agent/trace/trace.h"
#include "agent/core/arm.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#pragma weak __libc_single_threaded

/* Numbers the registry can hold (a bit each in `watch` and `lost`). */
#define FDS_MAX 65536
/* How far below the soft limit the agent's range starts. */
#define FDS_SPAN 256
/* Descriptors registered at once. */
#define FDS_SLOTS 512
/* Libraries whose calls are the agent's. */
#define FDS_LIBS 4
/* Longest a host's call waits for an agent descriptor in flight. */
#define FDS_WAIT_NS 100000000L
/* The accept back-off, doubling from MIN to MAX after each failure. */
#define ACCEPT_BACKOFF_MIN_NS 1000000L
#define ACCEPT_BACKOFF_MAX_NS 500000000L

struct fds_slot {
    int fd1; /* fd + 1; 0 free, -1 being filled */
    int kind;
    int *holder;
    dev_t dev;
    ino_t ino;
};

/* watch: the number is registered or lost (the close fast path reads
 * only this); lost: the host took the number over from civetweb. Both
 * written with atomics by any thread, read without locks. */
static uint64_t watch[FDS_MAX / 64];
static uint64_t lost[FDS_MAX / 64];
static struct fds_slot slots[FDS_SLOTS];
static int in_flight;  /* agent descriptors between creation and move */
static int registered; /* number of slots in use */
/* Slots ever filled, from the first: the lookups read no further. A
 * process that registers one descriptor (an exec'd descendant reading a
 * /proc file in its constructor) touches one page of the slots, not
 * their 16 KB of never-written zeros (a fault each). Only grows. */
static int slots_high;
static int owner_pid FORK_STATE; /* the process whose registry this is */
/* 1 once a number went to `lost` (set with it, cleared by a fork child's
 * sweep): a child of a process that lost none touches no page of the
 * bitmaps (each is a copy-on-write fault in parent and child alike). */
static int lost_any;

static struct {
    uintptr_t lo, hi;
} libs[FDS_LIBS];
static int nlibs;

static int (*real_close)(int);
static int (*real_close_range)(unsigned, unsigned, int);
static void (*real_closefrom)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_pipe2)(int *, int);
static int (*real_socket)(int, int, int);
static int (*real_accept)(int, struct sockaddr *, socklen_t *);
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
static ssize_t (*real_recv)(int, void *, size_t, int);
static ssize_t (*real_send)(int, const void *, size_t, int);
static int (*real_shutdown)(int, int);

/* Before the resolution below (another library's constructor), the
 * system calls themselves. */
__attribute__((constructor(102))) static void fds_resolve(void)
{
    real_close = next_symbol("close");
    real_close_range = next_symbol("close_range");
    real_closefrom = next_symbol("closefrom");
    real_dup2 = next_symbol("dup2");
    real_dup3 = next_symbol("dup3");
    real_pipe2 = next_symbol("pipe2");
    real_socket = next_symbol("socket");
    real_accept = next_symbol("accept");
    real_accept4 = next_symbol("accept4");
    real_recv = next_symbol("recv");
    real_send = next_symbol("send");
    real_shutdown = next_symbol("shutdown");
    owner_pid = (int)getpid();
}

/* The C library's function when resolved, else the system call itself
 * (a call before the constructor's resolution). */
#define REAL_OR_SYSCALL(fn, nr, ...)                                        \
    ((fn) ? (fn)(__VA_ARGS__) : syscall((nr), __VA_ARGS__))

static int do_close(int fd)
{
    return (int)REAL_OR_SYSCALL(real_close, SYS_close, fd);
}

static int do_close_range(unsigned lo, unsigned hi, int flags)
{
    return (int)REAL_OR_SYSCALL(real_close_range, SYS_close_range, lo, hi,
                                 flags);
}

static int do_dup(int oldfd, int newfd, int is_dup3, int flags)
{
    if (!is_dup3)
        return (int)REAL_OR_SYSCALL(real_dup2, SYS_dup2, oldfd, newfd);
    return (int)REAL_OR_SYSCALL(real_dup3, SYS_dup3, oldfd, newfd, flags);
}

/* ---- bits and slots --------------------------------------------------------- */

static inline int bit_get(const uint64_t *map, int fd)
{
    return (unsigned)fd < FDS_MAX &&
           ((__atomic_load_n(&map[fd >> 6], __ATOMIC_ACQUIRE) >> (fd & 63)) &
            1);
}

static inline void bit_set(uint64_t *map, int fd)
{
    if ((unsigned)fd < FDS_MAX)
        __atomic_fetch_or(&map[fd >> 6], 1ULL << (fd & 63), __ATOMIC_RELEASE);
}

static inline void bit_clear(uint64_t *map, int fd)
{
    if ((unsigned)fd < FDS_MAX)
        __atomic_fetch_and(&map[fd >> 6], ~(1ULL << (fd & 63)),
                           __ATOMIC_RELEASE);
}

/* 1 when the host took fd over. A process that lost none reads no page
 * of `lost` (each a fault the first time). */
static inline int is_lost(int fd)
{
    return __atomic_load_n(&lost_any, __ATOMIC_ACQUIRE) && bit_get(lost, fd);
}

/* 1 when fd is registered or lost. A process that never registered one
 * reads no page of the bitmaps: the host's close and dup2 in an exec'd
 * descendant cost no page fault. */
static inline int watched(int fd)
{
    return __atomic_load_n(&slots_high, __ATOMIC_ACQUIRE) &&
           bit_get(watch, fd);
}

/* 1 when fd is registered (owned, not lost). */
static inline int owned(int fd)
{
    return watched(fd) && !is_lost(fd);
}

static struct fds_slot *slot_find(int fd)
{
    int high = __atomic_load_n(&slots_high, __ATOMIC_ACQUIRE);
    for (int i = 0; i < high; i++)
        if (__atomic_load_n(&slots[i].fd1, __ATOMIC_ACQUIRE) == fd + 1)
            return &slots[i];
    return NULL;
}

static void slot_release(struct fds_slot *s)
{
    __atomic_store_n(&s->fd1, 0, __ATOMIC_RELEASE);
    __atomic_fetch_sub(&registered, 1, __ATOMIC_RELAXED);
}

/* Unregisters fd (its number is free or the host's from now on). */
static void forget(int fd)
{
    if (!__atomic_load_n(&slots_high, __ATOMIC_ACQUIRE))
        return; /* nothing was ever registered */
    bit_clear(watch, fd);
    struct fds_slot *s = slot_find(fd);
    if (s)
        slot_release(s);
}

static int registry_full_logged, lost_logged, replaced_logged;

static void enroll(int fd, enum fds_kind kind, int *holder)
{
    struct stat st;
    if ((unsigned)fd >= FDS_MAX || fstat(fd, &st) != 0)
        return;
    /* A slot left for this number (its close went past the interposer)
     * is the stale record of another file: replaced. */
    struct fds_slot *old = slot_find(fd);
    if (old)
        slot_release(old);
    for (int i = 0; i < FDS_SLOTS; i++) {
        int free_ = 0;
        if (!__atomic_compare_exchange_n(&slots[i].fd1, &free_, -1, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            continue;
        slots[i].kind = kind;
        slots[i].holder = holder;
        slots[i].dev = st.st_dev;
        slots[i].ino = st.st_ino;
        int high = __atomic_load_n(&slots_high, __ATOMIC_RELAXED);
        while (high <= i &&
               !__atomic_compare_exchange_n(&slots_high, &high, i + 1, 1,
                                            __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED))
            ;
        __atomic_store_n(&slots[i].fd1, fd + 1, __ATOMIC_RELEASE);
        __atomic_fetch_add(&registered, 1, __ATOMIC_RELAXED);
        if (is_lost(fd))
            bit_clear(lost, fd);
        bit_set(watch, fd);
        return;
    }
    if (!registry_full_logged++)
        log_info("more than %d descriptors at once: descriptor %d is not "
                 "protected from the program's close and dup2",
                 FDS_SLOTS, fd);
}

int fds_count(void)
{
    return __atomic_load_n(&registered, __ATOMIC_RELAXED);
}

int fds_next(int after, enum fds_kind kind)
{
    for (int fd = after + 1; fd < FDS_MAX; fd++) {
        if (!(fd & 63) && !__atomic_load_n(&watch[fd >> 6], __ATOMIC_ACQUIRE)) {
            fd += 63;
            continue;
        }
        if (!owned(fd))
            continue;
        struct fds_slot *s = slot_find(fd);
        if (s && s->kind == (int)kind)
            return fd;
    }
    return -1;
}

/* ---- the agent's side ------------------------------------------------------- */

int fds_floor(void)
{
    struct rlimit rl;
    long lim = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        lim = (long)rl.rlim_cur;
    if (lim > FDS_MAX)
        lim = FDS_MAX;
    long span = lim / 4 < FDS_SPAN ? lim / 4 : FDS_SPAN;
    return (int)(lim - span);
}

void fds_begin(void)
{
    __atomic_fetch_add(&in_flight, 1, __ATOMIC_SEQ_CST);
}

void fds_end(void)
{
    __atomic_fetch_sub(&in_flight, 1, __ATOMIC_SEQ_CST);
}

int fds_adopt(int fd, enum fds_kind kind, int *holder)
{
    if (fd < 0)
        return fd;
    int floor_ = fds_floor();
    if (fd < floor_) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, floor_);
        if (high >= 0) {
            do_close(fd);
            fd = high;
        }
    }
    if (holder)
        __atomic_store_n(holder, fd, __ATOMIC_RELEASE);
    enroll(fd, kind, holder);
    return fd;
}

int fds_open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    /* In the constructor, on the process's only thread, no host code
     * runs until the file is closed again: nothing to protect it from,
     * and an exec'd descendant's look at /proc (process/role.c) costs
     * three system calls and no page of the registry. */
    if (!agent_ready && &__libc_single_threaded && __libc_single_threaded)
        return open(path, flags | O_CLOEXEC, mode);
    fds_begin();
    int fd = fds_adopt(open(path, flags | O_CLOEXEC, mode), FDS_TRANSIENT,
                       NULL);
    fds_end();
    return fd;
}

int fds_close(int fd)
{
    if (fd < 0) {
        errno = EBADF;
        return -1;
    }
    if (is_lost(fd)) {
        /* The host's now: only the agent's claim goes. */
        bit_clear(lost, fd);
        bit_clear(watch, fd);
        return 0;
    }
    forget(fd);
    return do_close(fd);
}

DIR *fds_opendir(const char *path)
{
    int fd = fds_open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d)
        fds_close(fd);
    return d;
}

int fds_closedir(DIR *d)
{
    /* closedir closes inside the C library, past the interposer. */
    forget(dirfd(d));
    return closedir(d);
}

int fds_pipe(int p[2], int flags)
{
    int t[2];
    fds_begin();
    int r = (int)REAL_OR_SYSCALL(real_pipe2, SYS_pipe2, t, flags);
    if (r == 0) {
        fds_adopt(t[0], FDS_HELD, &p[0]);
        fds_adopt(t[1], FDS_HELD, &p[1]);
    }
    fds_end();
    return r;
}

int fds_check(int fd)
{
    struct fds_slot *s = fd >= 0 ? slot_find(fd) : NULL;
    struct stat st;
    if (s && fstat(fd, &st) == 0 && st.st_dev == s->dev &&
        st.st_ino == s->ino)
        return 0;
    if (s)
        forget(fd);
    if (!lost_logged++)
        log_info("descriptor %d of the agent was closed or replaced behind "
                 "its back (a raw system call?); the agent no longer uses it",
                 fd);
    return -EBADF;
}

void fds_own_library(const void *addr)
{
    uintptr_t lo, hi;
    if (object_range_of(addr, &lo, &hi) != 0)
        return;
    int n = __atomic_load_n(&nlibs, __ATOMIC_ACQUIRE);
    if (n >= FDS_LIBS)
        return;
    for (int i = 0; i < n; i++)
        if (libs[i].lo == lo)
            return;
    libs[n].lo = lo;
    libs[n].hi = hi;
    __atomic_store_n(&nlibs, n + 1, __ATOMIC_RELEASE);
}

/* 1 when pc lies in a library working for the agent. */
static inline int from_agent_library(const void *pc)
{
    int n = __atomic_load_n(&nlibs, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++)
        if ((uintptr_t)pc - libs[i].lo < libs[i].hi - libs[i].lo)
            return 1;
    return 0;
}

/* 1 when p lies in such a library's static data (a holder that outlives
 * the call), 0 for a stack or heap address. */
static int holder_is_static(const void *p)
{
    return from_agent_library(p);
}

FORK_PATH void fds_fork_child(void)
{
    FORK_SET(in_flight, 0);
    owner_pid = (int)getpid();
    int high = slots_high;
    for (int i = 0; i < high; i++) {
        int fd1 = slots[i].fd1;
        if (fd1 <= 0 || slots[i].kind == FDS_HELD)
            continue;
        bit_clear(watch, fd1 - 1);
        do_close(fd1 - 1);
        slot_release(&slots[i]);
    }
    if (!lost_any)
        return;
    lost_any = 0;
    for (int i = 0; i < FDS_MAX / 64; i++) {
        if (!lost[i])
            continue;
        watch[i] &= ~lost[i];
        lost[i] = 0;
    }
}

/* ---- the host's side -------------------------------------------------------- */

/* Sleeps ns through the raw system call: glibc's nanosleep is a
 * cancellation point, and dup2, dup3 and close_range are not. */
static void nap_ns(long ns)
{
    struct timespec t = {ns / 1000000000L, ns % 1000000000L};
    syscall(SYS_nanosleep, &t, NULL);
}

/* Waits (bounded) until no agent descriptor is between its creation at a
 * low number and its move. */
static void wait_in_flight(void)
{
    if (likely(!__atomic_load_n(&in_flight, __ATOMIC_SEQ_CST)))
        return;
    for (long waited = 0;
         __atomic_load_n(&in_flight, __ATOMIC_SEQ_CST) && waited < FDS_WAIT_NS;
         waited += 50000)
        nap_ns(50000);
}

/* 1 in a child made by vfork (or clone sharing memory): it shares the
 * registry with its parent but has its own descriptor table, so it must
 * leave the registry alone. */
static int foreign_process(void)
{
    return (int)getpid() != owner_pid;
}

static __attribute__((noinline)) int host_close(int fd, const void *pc)
{
    if (guard_active() || from_agent_library(pc)) {
        /* The agent's own code, or civetweb or libunwind, closing. */
        if (bit_get(lost, fd) || owned(fd))
            return fds_close(fd);
        return do_close(fd);
    }
    wait_in_flight();
    if (owned(fd)) {
        errno = EBADF; /* as if the agent were not there */
        return -1;
    }
    return do_close(fd);
}

__attribute__((visibility("default"))) COMMON_PATH int close(int fd)
{
    if (unlikely(watched(fd) |
                 __atomic_load_n(&in_flight, __ATOMIC_RELAXED)))
        return host_close(fd, __builtin_return_address(0));
    return do_close(fd);
}

/* Closes [lo, hi] except the agent's numbers, piece by piece; 0 or -1
 * with errno from the first piece that failed. */
static int close_range_around(unsigned lo, unsigned hi, int flags)
{
    unsigned start = lo;
    unsigned end = hi < FDS_MAX - 1 ? hi : FDS_MAX - 1;
    for (unsigned fd = lo; fd <= end; fd++) {
        if (!(fd & 63) && fd + 63 <= end &&
            !__atomic_load_n(&watch[fd >> 6], __ATOMIC_ACQUIRE)) {
            fd += 63; /* a word with nothing of the agent's */
            continue;
        }
        if (!owned((int)fd))
            continue;
        if (fd > start && do_close_range(start, fd - 1, flags) != 0)
            return -1;
        start = fd + 1;
    }
    if (start > hi) /* the last number was the agent's */
        return 0;
    return do_close_range(start, hi, flags);
}

__attribute__((visibility("default"))) int close_range(unsigned lo,
                                                       unsigned hi, int flags)
{
    /* Setting close-on-exec is harmless (every agent descriptor has it),
     * and a range the kernel refuses is refused the same. */
    if (guard_active() || (flags & CLOSE_RANGE_CLOEXEC) || lo > hi ||
        !fds_count())
        return do_close_range(lo, hi, flags);
    wait_in_flight();
    return close_range_around(lo, hi, flags);
}

__attribute__((visibility("default"))) void closefrom(int lowfd)
{
    if (guard_active() || !fds_count()) {
        if (real_closefrom)
            real_closefrom(lowfd);
        else
            do_close_range(lowfd < 0 ? 0 : (unsigned)lowfd, ~0U, 0);
        return;
    }
    wait_in_flight();
    if (close_range_around(lowfd < 0 ? 0 : (unsigned)lowfd, ~0U, 0) == 0)
        return;
    /* No close_range in this kernel: one by one up to the limit. */
    struct rlimit rl;
    long top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < FDS_MAX
                   ? (long)rl.rlim_cur
                   : FDS_MAX;
    for (long fd = lowfd < 0 ? 0 : lowfd; fd < top; fd++)
        if (!owned((int)fd))
            do_close((int)fd);
}

/* The host's dup2 (is_dup3 0) or dup3 onto newfd, or from oldfd, where
 * one is a number the agent watches. */
static __attribute__((noinline)) int host_dup(int oldfd, int newfd,
                                              int is_dup3, int flags)
{
    if (guard_active() || foreign_process() || (is_dup3 && oldfd == newfd))
        return do_dup(oldfd, newfd, is_dup3, flags);
    wait_in_flight();
    if (owned(oldfd)) {
        errno = EBADF; /* not open, as far as the host can know */
        return -1;
    }
    if (!owned(newfd) || fcntl(oldfd, F_GETFD) < 0)
        return do_dup(oldfd, newfd, is_dup3, flags);
    struct fds_slot *s = slot_find(newfd);
    if (s && s->kind == FDS_TRANSIENT) {
        /* Agent code reading a file: give it a moment to finish. */
        for (long waited = 0; owned(newfd) && waited < FDS_WAIT_NS * 10;
             waited += 100000)
            nap_ns(100000);
        s = slot_find(newfd);
    }
    int moved = -1;
    if (s && s->kind == FDS_HELD && s->holder)
        moved = fcntl(newfd, F_DUPFD_CLOEXEC, fds_floor());
    if (moved >= 0) {
        /* The holder first: from now on the agent uses the new number. */
        __atomic_store_n(s->holder, moved, __ATOMIC_RELEASE);
        enroll(moved, FDS_HELD, s->holder);
        forget(newfd);
    } else if (owned(newfd)) {
        /* civetweb's socket (or a file the agent could not move): the
         * number becomes the host's, and civetweb's calls on it fail. */
        bit_set(lost, newfd);
        __atomic_store_n(&lost_any, 1, __ATOMIC_RELEASE);
        struct fds_slot *t = slot_find(newfd);
        if (t)
            slot_release(t);
        if (!replaced_logged++)
            log_info("the program replaced descriptor %d, one of the "
                     "agent's server sockets: that connection or listener "
                     "is given up",
                     newfd);
    }
    return do_dup(oldfd, newfd, is_dup3, flags);
}

__attribute__((visibility("default"))) COMMON_PATH int dup2(int oldfd,
                                                             int newfd)
{
    if (unlikely(watched(newfd) | watched(oldfd) |
                 __atomic_load_n(&in_flight, __ATOMIC_RELAXED)))
        return host_dup(oldfd, newfd, 0, 0);
    return do_dup(oldfd, newfd, 0, 0);
}

__attribute__((visibility("default"))) COMMON_PATH int dup3(int oldfd, int newfd,
                                                int flags)
{
    if (unlikely(watched(newfd) | watched(oldfd) |
                 __atomic_load_n(&in_flight, __ATOMIC_RELAXED)))
        return host_dup(oldfd, newfd, 1, flags);
    return do_dup(oldfd, newfd, 1, flags);
}

/* ---- the agent's libraries' side --------------------------------------------- */

__attribute__((visibility("default"))) int pipe2(int p[2], int flags)
{
    if (likely(!from_agent_library(__builtin_return_address(0))))
        return (int)REAL_OR_SYSCALL(real_pipe2, SYS_pipe2, p, flags);
    /* libunwind's memory-validation pipe: its array is static, so it can
     * hold the numbers and be rewritten when the host targets them. */
    int t[2];
    fds_begin();
    int r = (int)REAL_OR_SYSCALL(real_pipe2, SYS_pipe2, t, flags);
    if (r == 0) {
        int held = holder_is_static(p);
        p[0] = fds_adopt(t[0], held ? FDS_HELD : FDS_TRANSIENT,
                         held ? &p[0] : NULL);
        p[1] = fds_adopt(t[1], held ? FDS_HELD : FDS_TRANSIENT,
                         held ? &p[1] : NULL);
    }
    fds_end();
    return r;
}

__attribute__((visibility("default"))) int socket(int domain, int type,
                                                  int protocol)
{
    if (likely(!from_agent_library(__builtin_return_address(0))))
        return (int)REAL_OR_SYSCALL(real_socket, SYS_socket, domain, type,
                                    protocol);
    fds_begin();
    int fd = (int)REAL_OR_SYSCALL(real_socket, SYS_socket, domain, type,
                                  protocol);
    fd = fds_adopt(fd, FDS_SOCKET, NULL);
    fds_end();
    return fd;
}

/* Only civetweb's master thread accepts: no race on the delay. */
static long accept_delay_ns;

static void accept_backoff(void)
{
    accept_delay_ns = accept_delay_ns ? accept_delay_ns * 2
                                      : ACCEPT_BACKOFF_MIN_NS;
    if (accept_delay_ns > ACCEPT_BACKOFF_MAX_NS)
        accept_delay_ns = ACCEPT_BACKOFF_MAX_NS;
    nap_ns(accept_delay_ns);
}

static int listener_logged;

/* The listener never blocks its accept: civetweb polls before it accepts
 * and takes a failed accept as nothing to do, and the accept is made
 * inside fds_begin (below), which a host's close waits on. */
static void listener_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK))
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* 1 when fd is a connection accepted on the listener: a socket whose
 * local address is the listener's (what a host's sweep put over the low
 * number before the move is a file, or a socket of its own elsewhere). */
static int accepted_on(int fd, int listener)
{
    struct stat st;
    struct sockaddr_storage a, b;
    socklen_t la = sizeof a, lb = sizeof b;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
        getsockname(fd, (struct sockaddr *)&a, &la) != 0 ||
        getsockname(listener, (struct sockaddr *)&b, &lb) != 0 || la != lb)
        return 0;
    if (a.ss_family == AF_INET)
        return ((struct sockaddr_in *)&a)->sin_port ==
               ((struct sockaddr_in *)&b)->sin_port;
    if (a.ss_family == AF_INET6)
        return ((struct sockaddr_in6 *)&a)->sin6_port ==
               ((struct sockaddr_in6 *)&b)->sin6_port;
    return memcmp(&a, &b, la) == 0;
}

/* civetweb's accept: only on its own listener, moved high, and with a
 * growing pause after each failure so that a listener it cannot accept on
 * (descriptors exhausted, listener given up) costs no CPU. The new
 * descriptor is in flight from before the accept until it is moved: a
 * host sweeping its descriptors (close_range from 3, dup2 over low
 * numbers) waits instead of closing it, or reusing its number for a file
 * of its own that the response would then be written to. */
static int agent_accept(int fd, struct sockaddr *addr, socklen_t *len,
                        int flags)
{
    if (!owned(fd) || fds_check(fd) != 0) {
        /* A listener replaced by dup2 was said when it was replaced. */
        if (!listener_logged++ && !owned(fd) && !bit_get(lost, fd))
            log_info("the program took over descriptor %d, the agent's "
                     "listening socket; the profiling endpoints stop "
                     "answering", fd);
        accept_backoff();
        errno = EBADF;
        return -1;
    }
    listener_nonblocking(fd);
    fds_begin();
    int r = flags == -1
                ? (int)REAL_OR_SYSCALL(real_accept, SYS_accept, fd, addr, len)
                : (int)REAL_OR_SYSCALL(real_accept4, SYS_accept4, fd, addr,
                                       len, flags);
    if (r < 0) {
        int e = errno;
        fds_end();
        if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM)
            accept_backoff();
        errno = e;
        return -1;
    }
    accept_delay_ns = 0;
    r = fds_adopt(r, FDS_SOCKET, NULL);
    fds_end();
    if (r < fds_floor()) {
        /* Not moved: the host closed the number first, and may own it
         * now. Forgotten, never closed nor answered into. */
        forget(r);
        errno = ECONNABORTED;
        return -1;
    }
    if (!accepted_on(r, fd)) {
        /* The host put a file of its own over the number before the move:
         * the connection is lost, and the agent's copy of that file goes. */
        fds_close(r);
        errno = ECONNABORTED;
        return -1;
    }
    return r;
}

/* The host's accept while an execution trace runs: timed as a network
 * wait (agent/trace/trace.h). */
static __attribute__((noinline)) int traced_accept(int fd,
                                                  struct sockaddr *addr,
                                                  socklen_t *len, int flags)
{
    return TRACE_CALL(TRACE_NET, fd,
                      flags == -1 ? (int)REAL_OR_SYSCALL(real_accept,
                                                         SYS_accept, fd, addr,
                                                         len)
                                  : (int)REAL_OR_SYSCALL(real_accept4,
                                                         SYS_accept4, fd, addr,
                                                         len, flags));
}

static inline __attribute__((always_inline)) int
accept_body(int fd, struct sockaddr *addr, socklen_t *len)
{
    arm_poke(ARM_WAIT, 1);
    if (likely(!from_agent_library(__builtin_return_address(0))))
        return unlikely(trace_on) ? traced_accept(fd, addr, len, -1)
                                  : (int)REAL_OR_SYSCALL(real_accept, SYS_accept,
                                                         fd, addr, len);
    return agent_accept(fd, addr, len, -1);
}

/* Noted while it waits in a process that is not dumpable
 * (agent/threads/blocked.h). */
__attribute__((visibility("default"))) int
accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    int n_ = BLOCKED_ENTER(SYS_accept, real_accept);
    int r_ = accept_body(fd, addr, len);
    BLOCKED_LEAVE(n_);
    return r_;
}

static inline __attribute__((always_inline)) int
accept4_body(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    arm_poke(ARM_WAIT, 1);
    if (likely(!from_agent_library(__builtin_return_address(0))))
        return unlikely(trace_on)
                   ? traced_accept(fd, addr, len, flags)
                   : (int)REAL_OR_SYSCALL(real_accept4, SYS_accept4, fd, addr,
                                          len, flags);
    return agent_accept(fd, addr, len, flags);
}

/* Noted while it waits in a process that is not dumpable
 * (agent/threads/blocked.h). */
__attribute__((visibility("default"))) int
accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    int n_ = BLOCKED_ENTER(SYS_accept4, real_accept4);
    int r_ = accept4_body(fd, addr, len, flags);
    BLOCKED_LEAVE(n_);
    return r_;
}

/* civetweb's calls on a number the host took over fail as on a closed
 * connection, without reaching the host's file. */
static inline int lost_to_host(int fd, const void *pc)
{
    return unlikely(bit_get(lost, fd)) && from_agent_library(pc);
}

/* recv and send: the host's calls go straight through; civetweb's on a
 * number the host took over fail as on a connection the peer dropped. */
static inline ssize_t transfer(int sending, int fd, void *buf, size_t n,
                               int flags, const void *pc)
{
    if (lost_to_host(fd, pc)) {
        errno = sending ? EPIPE : ECONNRESET;
        return -1;
    }
    if (sending)
        return real_send ? real_send(fd, buf, n, flags)
                         : syscall(SYS_sendto, fd, buf, n, flags, 0, 0);
    return real_recv ? real_recv(fd, buf, n, flags)
                     : syscall(SYS_recvfrom, fd, buf, n, flags, 0, 0);
}

/* recv and send while an execution trace runs: timed as network waits. */
static __attribute__((noinline)) ssize_t
traced_transfer(int sending, int fd, void *buf, size_t n, int flags,
                const void *pc)
{
    return TRACE_CALL(TRACE_NET, fd, transfer(sending, fd, buf, n, flags, pc));
}

static inline __attribute__((always_inline)) ssize_t
recv_body(int fd, void *buf, size_t n, int flags)
{
    arm_poke(ARM_WAIT, 1);
    const void *pc = __builtin_return_address(0);
    if (unlikely(trace_on))
        return traced_transfer(0, fd, buf, n, flags, pc);
    return transfer(0, fd, buf, n, flags, pc);
}

/* Noted while it waits in a process that is not dumpable
 * (agent/threads/blocked.h). */
__attribute__((visibility("default"))) ssize_t
recv(int fd, void *buf, size_t n, int flags)
{
    int n_ = BLOCKED_ENTER(SYS_recvfrom, real_recv);
    ssize_t r_ = recv_body(fd, buf, n, flags);
    BLOCKED_LEAVE(n_);
    return r_;
}

__attribute__((visibility("default"))) ssize_t send(int fd, const void *buf,
                                                    size_t n, int flags)
{
    const void *pc = __builtin_return_address(0);
    if (unlikely(trace_on))
        return traced_transfer(1, fd, (void *)buf, n, flags, pc);
    return transfer(1, fd, (void *)buf, n, flags, pc);
}

__attribute__((visibility("default"))) int shutdown(int fd, int how)
{
    const void *pc = __builtin_return_address(0);
    /* A connection handed to an agent thread (fds_handoff.c): civetweb's
     * graceful close must not end the response that thread writes. */
    if (lost_to_host(fd, pc) ||
        (from_agent_library(pc) && unlikely(fds_handed_take(fd))))
        return 0;
    return (int)REAL_OR_SYSCALL(real_shutdown, SYS_shutdown, fd, how);
}
