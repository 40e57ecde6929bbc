/*
 * The C library's functions as the agent's own code calls them
 * (agent/core/real.c): never through one of the agent's doors, the
 * names it interposes (agent/exports.map, docs/doors.md). The agent's
 * allocations, writes, waits, locks and mask changes are its own work,
 * not the host's: they reach the function the process's calls would
 * reach if the agent were not loaded.
 *
 * Which function: the process's own definition when it is not the
 * agent's (a sanitizer's interceptor, an allocator linked into the
 * program or preloaded before the agent, the C library in a process the
 * agent was attached to), else the next one after the agent, found as
 * the doors find it (next_symbol). Resolved at the first call, without a
 * lock or an allocation.
 *
 * The malloc family is the process's allocator. Where that is the
 * agent's own door, the calls here skip its sampling but keep what the
 * agent's blocks rely on: an agent thread's large blocks from mmap
 * (heap_own_blocks.c, counted as the agent's memory) and a free that
 * takes those and the sampled blocks out of their tables.
 *
 * Not here: pthread_create (real_pthread_create is the process's
 * definition, the agent's door included: it marks the agent's threads),
 * dl_iterate_phdr (loader_iterate_phdr, agent/core/loader.h), and the
 * descriptor calls (socket, accept, accept4, close, send, recv,
 * shutdown) whose doors keep the agent's descriptors its own, told by
 * the caller's address (agent/host/fds.c; docs/doors.md).
 */
#ifndef PPROF_AGENT_REAL_H
#define PPROF_AGENT_REAL_H

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

/* Same contracts as the C library's. Not async-signal-safe, does not
 * allocate (the malloc family aside). */
void *real_malloc(size_t n);
void real_free(void *p);
void *real_calloc(size_t a, size_t b);
void *real_realloc(void *p, size_t n);

int real_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                        void *(*fn)(void *), void *arg);
int real_pthread_join(pthread_t t, void **ret);
int real_pthread_setname_np(pthread_t t, const char *name);
int real_pthread_mutex_lock(pthread_mutex_t *m);
int real_pthread_mutex_trylock(pthread_mutex_t *m);
int real_pthread_mutex_unlock(pthread_mutex_t *m);
int real_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
int real_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                const struct timespec *until);
int real_prctl(int option, ...);
int real_poll(struct pollfd *fds, nfds_t n, int timeout);
int real_connect(int fd, const struct sockaddr *addr, socklen_t len);
int real_fsync(int fd);
int real_usleep(useconds_t us);
unsigned real_sleep(unsigned s);
int real_setuid(uid_t uid);
int real_setgid(gid_t gid);
int real_setgroups(size_t n, const gid_t *groups);

/* Resolves the names below before the agent installs a signal handler:
 * called first by init_tables, in a process where the agent is on (one
 * where it is off resolves them at their first call, never in a handler
 * of the agent's). Not async-signal-safe. */
void real_init(void);

/* Async-signal-safe once real_init ran. */
long real_syscall(long nr, ...);
ssize_t real_read(int fd, void *buf, size_t n);
ssize_t real_write(int fd, const void *buf, size_t n);
ssize_t real_pwrite(int fd, const void *buf, size_t n, off_t at);
int real_nanosleep(const struct timespec *req, struct timespec *rem);
int real_clock_nanosleep(clockid_t clock, int flags,
                         const struct timespec *req, struct timespec *rem);
int real_pthread_sigmask(int how, const sigset_t *set, sigset_t *old);

/* The agent's door's side of the malloc family (agent/heap/malloc_hooks.c),
 * taken when the process's malloc is the agent's own. */
struct real_allocator {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
};

#endif
