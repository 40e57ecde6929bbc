/*
 * The descriptors the agent owns (agent/host/fds.c; docs/descriptors.md has the
 * protocol). Every descriptor the agent, civetweb or libunwind creates is
 * moved out of the low numbers a host reuses and registered; the host's
 * close, close_range, closefrom, dup2 and dup3 then behave towards those
 * numbers exactly as they would if the agent were not there, and never
 * touch the agent's files.
 */
#ifndef PPROF_FDS_H
#define PPROF_FDS_H

#include <dirent.h>
#include <stdint.h>

/* What holds a registered descriptor's number. */
enum fds_kind {
    FDS_TRANSIENT = 0, /* opened and closed by one call of agent code */
    FDS_HELD = 1,      /* kept in *holder, which the agent re-reads each use */
    FDS_SOCKET = 2,    /* civetweb's: the number lives inside civetweb */
};

/*
 * Declares the library containing addr (civetweb, libunwind) as part of
 * the agent: its socket, accept, accept4 and pipe2 calls create
 * descriptors the agent owns, and its calls on a descriptor the host has
 * taken over fail instead of reaching the host's file. Not
 * async-signal-safe.
 */
void fds_own_library(const void *addr);

/*
 * Moves fd to a high number (F_DUPFD_CLOEXEC at or above fds_floor(); the
 * old number is closed) and registers it. holder, for FDS_HELD, is where
 * the caller keeps the number: it is written here and rewritten when the
 * host's dup2/dup3 targets the number (the caller re-reads it at each
 * use). Returns the descriptor to use (fd itself, still registered, when
 * no high number is free), or fd when fd < 0. Call between fds_begin()
 * and fds_end() when fd was just created. Async-signal-safe. Does not
 * allocate.
 */
int fds_adopt(int fd, enum fds_kind kind, int *holder);

/* Bracket the creation of a descriptor by agent code: while one is in
 * flight, a host's close/dup2/close_range waits (at most 100 ms) so that
 * it cannot hit the low number the kernel handed out before it is moved.
 * Async-signal-safe. Does not allocate. */
void fds_begin(void);
void fds_end(void);

/* open(2) plus fds_adopt(FDS_TRANSIENT). Async-signal-safe. */
int fds_open(const char *path, int flags, ...);

/* Forgets fd and closes it for real (the agent's own close, from any
 * context, fork child handlers included). Async-signal-safe. */
int fds_close(int fd);

/* opendir(3)/closedir(3) on a registered descriptor. Not
 * async-signal-safe. */
DIR *fds_opendir(const char *path);
int fds_closedir(DIR *d);

/* pipe2(2) whose two ends are FDS_HELD in p[0] and p[1] (p must outlive
 * them: static storage). Returns 0 or -1 with errno. Async-signal-safe. */
int fds_pipe(int p[2], int flags);

/* 0 when fd is still the file the agent registered under that number;
 * otherwise the number was lost behind the interposers' back (a raw
 * system call), is forgotten, said once in the log, and -EBADF returned.
 * Async-signal-safe. */
int fds_check(int fd);

/* Lowest number the agent moves its descriptors to, from the current
 * RLIMIT_NOFILE soft limit. Async-signal-safe. */
int fds_floor(void);

/* Fork child handler: closes the parent's sockets and transient
 * descriptors (their holders are the parent's threads); held ones are
 * left to their owners' handlers. */
void fds_fork_child(void);

/* Descriptors registered now (tests, /debug/stats). */
int fds_count(void);

/* The lowest registered descriptor above after, of the given kind; -1
 * when there is none. Async-signal-safe. Does not allocate. */
int fds_next(int after, enum fds_kind kind);

/*
 * A civetweb connection handed to a thread of the agent's own
 * (fds_handoff.c, http/handoff.c). fds_hand_off duplicates civetweb's
 * socket fd into the agent's range, registers the duplicate as FDS_HELD
 * in *holder (static storage, re-read at each use), and marks fd so that
 * civetweb's graceful close of it shuts nothing down: its
 * shutdown(SHUT_WR) is skipped (a shutdown acts on the connection, not on
 * one descriptor, and would end the response before it is written), its
 * close drops only its own number. Returns 0 or -errno (nothing changed).
 * Not async-signal-safe.
 */
int fds_hand_off(int fd, int *holder);
/* Closes the duplicate in *holder and removes fd's mark if civetweb's
 * shutdown has not taken it. Async-signal-safe (fork child handlers). */
void fds_hand_off_end(int *holder);
/* For the shutdown interposer: 1 when fd is a handed-off connection of
 * civetweb's (its mark is removed: civetweb shuts a connection down
 * once), 0 otherwise. Async-signal-safe. Does not allocate. */
int fds_handed_take(int fd);

#endif
