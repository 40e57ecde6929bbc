/*
 * The blocking calls the execution trace records, interposed: reads and
 * writes, socket transfers and connects, poll/select/epoll waits, sleeps,
 * file syncs, and pthread_setname_np (a thread's new name). accept, recv
 * and send are agent/host/fds.c's, which times them the same way.
 *
 * Entered on every host thread, for every such call. With no trace
 * running a hook is one load, a test and a jump to the real function
 * (test/bench/trace.sh counts the instructions); while a trace runs, the
 * call is timed and recorded after it returns (agent/trace/trace_rec.c),
 * with errno and the return value untouched.
 *
 * What a call is: a socket's transfer is a network wait, as are poll,
 * select and epoll waits (Go's network poller is where its goroutines wait
 * for descriptors); a sleep is a sleep; anything else a system call. A
 * read or write learns whether its descriptor is a socket from fstat,
 * cached per descriptor for the trace.
 *
 * Calls the C library makes inside itself (fread's read) do not pass
 * through here: only the program's own calls are seen.
 */
#include "agent/trace.h"

#include "agent/agent.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* Every real_* pointer starts at a stub that resolves them all. */
static void resolve(void);

#define REAL(ret, name, params, args)                                          \
    static ret stub_##name params;                                             \
    static ret(*real_##name) params = stub_##name;                             \
    static ret stub_##name params                                              \
    {                                                                          \
        resolve();                                                             \
        return real_##name args;                                               \
    }

REAL(ssize_t, read, (int fd, void *b, size_t n), (fd, b, n))
REAL(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n))
REAL(ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n))
REAL(ssize_t, writev, (int fd, const struct iovec *v, int n), (fd, v, n))
REAL(ssize_t, pread, (int fd, void *b, size_t n, off_t o), (fd, b, n, o))
REAL(ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o),
     (fd, b, n, o))
REAL(ssize_t, recvfrom,
     (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l),
     (fd, b, n, f, a, l))
REAL(ssize_t, sendto,
     (int fd, const void *b, size_t n, int f, const struct sockaddr *a,
      socklen_t l),
     (fd, b, n, f, a, l))
REAL(ssize_t, recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f))
REAL(ssize_t, sendmsg, (int fd, const struct msghdr *m, int f), (fd, m, f))
REAL(int, connect, (int fd, const struct sockaddr *a, socklen_t l),
     (fd, a, l))
REAL(int, poll, (struct pollfd *p, nfds_t n, int t), (p, n, t))
REAL(int, ppoll,
     (struct pollfd *p, nfds_t n, const struct timespec *t,
      const sigset_t *s),
     (p, n, t, s))
REAL(int, select,
     (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t),
     (n, r, w, e, t))
REAL(int, pselect,
     (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
      const sigset_t *s),
     (n, r, w, e, t, s))
REAL(int, epoll_wait, (int fd, struct epoll_event *ev, int n, int t),
     (fd, ev, n, t))
REAL(int, epoll_pwait,
     (int fd, struct epoll_event *ev, int n, int t, const sigset_t *s),
     (fd, ev, n, t, s))
REAL(int, nanosleep, (const struct timespec *r, struct timespec *m), (r, m))
REAL(int, clock_nanosleep,
     (clockid_t c, int f, const struct timespec *r, struct timespec *m),
     (c, f, r, m))
REAL(unsigned, sleep, (unsigned s), (s))
REAL(int, usleep, (useconds_t u), (u))
REAL(int, fsync, (int fd), (fd))
REAL(int, fdatasync, (int fd), (fd))
REAL(int, pthread_setname_np, (pthread_t t, const char *name), (t, name))

#define RESOLVE(name)                                                          \
    do {                                                                       \
        void *p_ = dlsym(RTLD_NEXT, #name);                                    \
        if (p_)                                                                \
            __atomic_store_n((void **)&real_##name, p_, __ATOMIC_RELEASE);     \
    } while (0)

static void resolve(void)
{
    RESOLVE(read);
    RESOLVE(write);
    RESOLVE(readv);
    RESOLVE(writev);
    RESOLVE(pread);
    RESOLVE(pwrite);
    RESOLVE(recvfrom);
    RESOLVE(sendto);
    RESOLVE(recvmsg);
    RESOLVE(sendmsg);
    RESOLVE(connect);
    RESOLVE(poll);
    RESOLVE(ppoll);
    RESOLVE(select);
    RESOLVE(pselect);
    RESOLVE(epoll_wait);
    RESOLVE(epoll_pwait);
    RESOLVE(nanosleep);
    RESOLVE(clock_nanosleep);
    RESOLVE(sleep);
    RESOLVE(usleep);
    RESOLVE(fsync);
    RESOLVE(fdatasync);
    RESOLVE(pthread_setname_np);
}

/* ---- what a descriptor is ----------------------------------------------------- */

#define FD_CACHE 4096
/* Per descriptor: the trace it was looked up in (its start time's bits)
 * and whether it is a socket in the low bit. */
static uint32_t fd_cache[FD_CACHE];

static int fd_kind(int fd)
{
    uint32_t stamp = (uint32_t)(trace_started_ns >> 8) & ~1u;
    if (fd >= 0 && fd < FD_CACHE) {
        uint32_t c = __atomic_load_n(&fd_cache[fd], __ATOMIC_RELAXED);
        if ((c & ~1u) == stamp)
            return c & 1 ? TRACE_NET : TRACE_SYSCALL;
    }
    struct stat st;
    int sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
    if (fd >= 0 && fd < FD_CACHE)
        __atomic_store_n(&fd_cache[fd], stamp | (uint32_t)sock,
                         __ATOMIC_RELAXED);
    return sock ? TRACE_NET : TRACE_SYSCALL;
}

/*
 * HOOK(ret, name, params, args, kind, obj): the exported name, whose whole
 * body with no trace running is a test of trace_on and a tail call of the
 * real function (no frame: test/bench/trace.sh counts it), and its traced
 * twin out of line, which times the call and records it as kind (FD: what
 * the descriptor is) on obj after it returned, errno untouched.
 */
#define FD (-1)
#define HOOK(ret, name, params, args, kind, obj)                               \
    static __attribute__((noinline)) ret traced_##name params                  \
    {                                                                          \
        int64_t t0_ = trace_clock();                                           \
        ret rv_ = real_##name args;                                            \
        int saved_ = errno;                                                    \
        int k_ = (kind);                                                       \
        if (k_ == FD)                                                          \
            k_ = fd_kind((int)(obj));                                          \
        errno = saved_;                                                        \
        trace_interval(k_, (uint64_t)(obj), t0_, 0);                           \
        return rv_;                                                            \
    }                                                                          \
    EXPORT FAST ret name params                                                \
    {                                                                          \
        if (__builtin_expect(trace_on, 0))                                     \
            return traced_##name args;                                         \
        return real_##name args;                                               \
    }

/* The fast path keeps no frame: it only tests and jumps, so a frame would
 * be three more instructions on every call and nothing to walk. */
#define FAST __attribute__((optimize("omit-frame-pointer")))

/* ---- the hooks ------------------------------------------------------------------ */

HOOK(ssize_t, read, (int fd, void *b, size_t n),
     (fd, b, n), FD, fd)
HOOK(ssize_t, write, (int fd, const void *b, size_t n),
     (fd, b, n), FD, fd)
HOOK(ssize_t, readv, (int fd, const struct iovec *v, int n),
     (fd, v, n), FD, fd)
HOOK(ssize_t, writev, (int fd, const struct iovec *v, int n),
     (fd, v, n), FD, fd)
HOOK(ssize_t, pread, (int fd, void *b, size_t n, off_t o),
     (fd, b, n, o), TRACE_SYSCALL, fd)
HOOK(ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o),
     (fd, b, n, o), TRACE_SYSCALL, fd)
HOOK(ssize_t, recvfrom, (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l),
     (fd, b, n, f, a, l), TRACE_NET, fd)
HOOK(ssize_t, sendto, (int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l),
     (fd, b, n, f, a, l), TRACE_NET, fd)
HOOK(ssize_t, recvmsg, (int fd, struct msghdr *m, int f),
     (fd, m, f), TRACE_NET, fd)
HOOK(ssize_t, sendmsg, (int fd, const struct msghdr *m, int f),
     (fd, m, f), TRACE_NET, fd)
HOOK(int, connect, (int fd, const struct sockaddr *a, socklen_t l),
     (fd, a, l), TRACE_NET, fd)
HOOK(int, poll, (struct pollfd *p, nfds_t n, int t),
     (p, n, t), TRACE_NET, 0)
HOOK(int, ppoll, (struct pollfd *p, nfds_t n, const struct timespec *t, const sigset_t *s),
     (p, n, t, s), TRACE_NET, 0)
HOOK(int, select, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t),
     (n, r, w, e, t), TRACE_NET, 0)
HOOK(int, pselect, (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *s),
     (n, r, w, e, t, s), TRACE_NET, 0)
HOOK(int, epoll_wait, (int fd, struct epoll_event *ev, int n, int t),
     (fd, ev, n, t), TRACE_NET, fd)
HOOK(int, epoll_pwait, (int fd, struct epoll_event *ev, int n, int t, const sigset_t *s),
     (fd, ev, n, t, s), TRACE_NET, fd)
HOOK(int, nanosleep, (const struct timespec *r, struct timespec *m),
     (r, m), TRACE_SLEEP, 0)
HOOK(int, clock_nanosleep, (clockid_t c, int f, const struct timespec *r, struct timespec *m),
     (c, f, r, m), TRACE_SLEEP, 0)
HOOK(unsigned, sleep, (unsigned s),
     (s), TRACE_SLEEP, 0)
HOOK(int, usleep, (useconds_t u),
     (u), TRACE_SLEEP, 0)
HOOK(int, fsync, (int fd),
     (fd), TRACE_SYSCALL, fd)
HOOK(int, fdatasync, (int fd),
     (fd), TRACE_SYSCALL, fd)

/* glibc's names of pread and pwrite for 64-bit offsets: the same calls. */
EXPORT FAST ssize_t pread64(int fd, void *b, size_t n, off_t o)
{
    return pread(fd, b, n, o);
}

EXPORT FAST ssize_t pwrite64(int fd, const void *b, size_t n, off_t o)
{
    return pwrite(fd, b, n, o);
}

EXPORT int pthread_setname_np(pthread_t t, const char *name)
{
    int r = real_pthread_setname_np(t, name);
    if (unlikely(trace_on) && r == 0 && pthread_equal(t, pthread_self()))
        trace_instant(TRACE_RENAME, 0, 0, name, strnlen(name, 15));
    return r;
}
