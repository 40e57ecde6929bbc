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

/* A call on fd, recorded as what fd is. */
#define FD_CALL(fd, call)                                                      \
    ({                                                                         \
        __typeof__(call) r_;                                                   \
        if (__builtin_expect(trace_on, 0)) {                                   \
            int64_t t0_ = trace_clock();                                       \
            r_ = (call);                                                       \
            int saved_ = errno;                                                \
            int kind_ = fd_kind(fd);                                           \
            errno = saved_;                                                    \
            trace_interval(kind_, (uint64_t)(fd), t0_, 0);                     \
        } else {                                                               \
            r_ = (call);                                                       \
        }                                                                      \
        r_;                                                                    \
    })

/* ---- the hooks ------------------------------------------------------------------ */

EXPORT ssize_t read(int fd, void *b, size_t n)
{
    return FD_CALL(fd, real_read(fd, b, n));
}

EXPORT ssize_t write(int fd, const void *b, size_t n)
{
    return FD_CALL(fd, real_write(fd, b, n));
}

EXPORT ssize_t readv(int fd, const struct iovec *v, int n)
{
    return FD_CALL(fd, real_readv(fd, v, n));
}

EXPORT ssize_t writev(int fd, const struct iovec *v, int n)
{
    return FD_CALL(fd, real_writev(fd, v, n));
}

EXPORT ssize_t pread(int fd, void *b, size_t n, off_t o)
{
    return TRACE_CALL(TRACE_SYSCALL, fd, real_pread(fd, b, n, o));
}

EXPORT ssize_t pwrite(int fd, const void *b, size_t n, off_t o)
{
    return TRACE_CALL(TRACE_SYSCALL, fd, real_pwrite(fd, b, n, o));
}

EXPORT ssize_t pread64(int fd, void *b, size_t n, off_t o)
{
    return TRACE_CALL(TRACE_SYSCALL, fd, real_pread(fd, b, n, o));
}

EXPORT ssize_t pwrite64(int fd, const void *b, size_t n, off_t o)
{
    return TRACE_CALL(TRACE_SYSCALL, fd, real_pwrite(fd, b, n, o));
}

EXPORT ssize_t recvfrom(int fd, void *b, size_t n, int f, struct sockaddr *a,
                        socklen_t *l)
{
    return TRACE_CALL(TRACE_NET, fd, real_recvfrom(fd, b, n, f, a, l));
}

EXPORT ssize_t sendto(int fd, const void *b, size_t n, int f,
                      const struct sockaddr *a, socklen_t l)
{
    return TRACE_CALL(TRACE_NET, fd, real_sendto(fd, b, n, f, a, l));
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int f)
{
    return TRACE_CALL(TRACE_NET, fd, real_recvmsg(fd, m, f));
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int f)
{
    return TRACE_CALL(TRACE_NET, fd, real_sendmsg(fd, m, f));
}

EXPORT int connect(int fd, const struct sockaddr *a, socklen_t l)
{
    return TRACE_CALL(TRACE_NET, fd, real_connect(fd, a, l));
}

EXPORT int poll(struct pollfd *p, nfds_t n, int t)
{
    return TRACE_CALL(TRACE_NET, 0, real_poll(p, n, t));
}

EXPORT int ppoll(struct pollfd *p, nfds_t n, const struct timespec *t,
                 const sigset_t *s)
{
    return TRACE_CALL(TRACE_NET, 0, real_ppoll(p, n, t, s));
}

EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t)
{
    return TRACE_CALL(TRACE_NET, 0, real_select(n, r, w, e, t));
}

EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e,
                   const struct timespec *t, const sigset_t *s)
{
    return TRACE_CALL(TRACE_NET, 0, real_pselect(n, r, w, e, t, s));
}

EXPORT int epoll_wait(int fd, struct epoll_event *ev, int n, int t)
{
    return TRACE_CALL(TRACE_NET, fd, real_epoll_wait(fd, ev, n, t));
}

EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int n, int t,
                       const sigset_t *s)
{
    return TRACE_CALL(TRACE_NET, fd, real_epoll_pwait(fd, ev, n, t, s));
}

EXPORT int nanosleep(const struct timespec *r, struct timespec *m)
{
    return TRACE_CALL(TRACE_SLEEP, 0, real_nanosleep(r, m));
}

EXPORT int clock_nanosleep(clockid_t c, int f, const struct timespec *r,
                           struct timespec *m)
{
    return TRACE_CALL(TRACE_SLEEP, 0, real_clock_nanosleep(c, f, r, m));
}

EXPORT unsigned sleep(unsigned s)
{
    return TRACE_CALL(TRACE_SLEEP, 0, real_sleep(s));
}

EXPORT int usleep(useconds_t u)
{
    return TRACE_CALL(TRACE_SLEEP, 0, real_usleep(u));
}

EXPORT int fsync(int fd)
{
    return TRACE_CALL(TRACE_SYSCALL, fd, real_fsync(fd));
}

EXPORT int fdatasync(int fd)
{
    return TRACE_CALL(TRACE_SYSCALL, fd, real_fdatasync(fd));
}

EXPORT int pthread_setname_np(pthread_t t, const char *name)
{
    int r = real_pthread_setname_np(t, name);
    if (unlikely(trace_on) && r == 0 && pthread_equal(t, pthread_self()))
        trace_instant(TRACE_RENAME, 0, 0, name, strnlen(name, 15));
    return r;
}
