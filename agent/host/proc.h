/*
 * Reading /proc and other small files, one way for the whole agent
 * (agent/host/proc.c): a small file into a buffer, a whole file of unknown
 * size (procfs reports 0), a thread's name, and the numeric entries of a
 * folder (/proc/self/task, /proc/self/fd). Descriptors are the agent's own
 * (fds_open: invisible to the host's descriptor accounting).
 *
 * Not async-signal-safe; never allocate except proc_slurp. Safe on any
 * thread, also inside interposed calls' slow paths.
 */
#ifndef PPROF_PROC_H
#define PPROF_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* Reads at most size - 1 bytes of path into buf, NUL-terminated (one
 * read: enough for the small /proc files). Returns the length or -errno. */
ssize_t proc_read(const char *path, char *buf, size_t size);

/* The whole file in one malloc'd, NUL-terminated buffer (*out), read until
 * end of file. Returns 0 or -errno. */
int proc_slurp(const char *path, char **out);

/* The name of thread tid of this process (/proc/self/task/TID/comm),
 * without its newline, cut to size - 1 bytes. Returns its length, or
 * -errno with out = "" (a thread that is gone). */
int proc_thread_name(int tid, char *out, size_t size);

/* The state letter of thread tid (/proc/self/task/TID/stat: R, S, D, ...)
 * and, when name is not NULL, its name from the same read (as comm, cut
 * to size - 1 bytes). Returns '?' with name = "" when unreadable. */
char proc_thread_state(int tid, char *name, size_t size);

/* The same from a stat line already read (NUL-terminated). */
char proc_parse_stat(const char *buf, char *name, size_t size);

/* Field n (>= 3, as proc(5) numbers them) of /proc/PID/stat, as a number;
 * 0 when unreadable, or when the process is a zombie (gone but not yet
 * reaped: it serves and forks nothing). Not async-signal-safe. */
unsigned long long proc_stat_field(int pid, int n);

/* Calls fn(arg, n, dir_fd) for each entry of folder dir whose name is a
 * number in [0, INT_MAX] (thread ids in /proc/self/task, descriptors in
 * /proc/self/fd), in readdir order; dir_fd is the listing's own
 * descriptor. Stops early when fn returns non-zero. Returns that value, 0,
 * or -errno when dir cannot be opened. */
int proc_list(const char *dir, int (*fn)(void *arg, int n, int dir_fd),
              void *arg);

/*
 * The threads folder /proc/self/task held open, for a reader that reads
 * small files of many threads many times a second (the wall profile): a
 * read through it is one openat from the folder (no path walk from the
 * root), and its descriptor is not moved and registered as fds_open's
 * are. It lives for the read only, at the number the kernel gives it,
 * inside fds_begin/fds_end: a host's close, close_range or dup2 that lands
 * meanwhile waits the few microseconds until it is closed, as it waits
 * for any agent descriptor not yet moved, and so never reaches it.
 */

/* Opens the folder as an FDS_HELD descriptor kept in *fd (static storage,
 * re-read at each use). Returns 0 or -errno. */
int proc_tasks_open(int *fd);

/* Closes it (nothing when *fd < 0); *fd = -1. */
void proc_tasks_close(int *fd);

/* Reads at most size - 1 bytes of /proc/self/task/TID/FILE into buf,
 * NUL-terminated, through the folder in *fd, or by path when fd is NULL or
 * no folder is held. Returns the length, -ENOENT (the thread is gone) or
 * another -errno. Does not allocate. */
ssize_t proc_task_read(const int *fd, int tid, const char *file, char *buf,
                       size_t size);

/* 0 when *fd is still the folder the agent opened; when a host's raw
 * close_range took the number, *fd = -1 (the number is the host's, not
 * closed) and -EBADF: open it again. Does not allocate. */
int proc_tasks_check(int *fd);

/* Threads of the process now, the agent's own included: the folder's link
 * count less 2 (one fstat; procfs counts each thread directory as a
 * link). Returns the count or -errno. Does not allocate. */
long proc_tasks_count(const int *fd);

/* ---- the threads book (proc_book.c) -------------------------------------- */

#include <signal.h>
#include <stdint.h>

/* 1 once the book is open: this process chrooted and reads its threads
 * and their masks from the book when /proc cannot be read. */
extern int proc_book_on;

/* Opens the book from /proc (before a chroot). Returns 0 or -errno (no
 * thread listed; the book is on all the same). Not async-signal-safe. */
int proc_book_open(void);

/* The calling thread notes its mask (it started, or changed it), or
 * forgets itself (it ends). Async-signal-safe. */
void proc_book_note_self(const sigset_t *mask);
void proc_book_forget_self(void);

/* Calls fn(arg, tid, -1) for each thread in the book, as proc_list. */
int proc_book_list(int (*fn)(void *arg, int tid, int dir_fd), void *arg);

/* The signals tid blocks, from the book: 0, or -ENOENT when not in it. */
int proc_book_blocked(int tid, uint64_t *blocked);

/* In a fork child: the book holds the child's only thread, with mask.
 * Async-signal-safe. */
void proc_book_fork_child(const sigset_t *mask);

/* ---- the program's name (program.c) -------------------------------------- */

/* Copies the file name execve was given. Called by the constructor of a
 * process the agent records in (before the host's own constructors, which
 * may rewrite that area for a process title), not in a pass-through one:
 * its page of the copy would be one more fault in every exec'd
 * descendant, which never reads it. */
void program_copy(void);

/* The name the program was started by: the base name of the file execve
 * was given (a link's name, not its target's), else its comm, else
 * "process". */
const char *program_name(void);

/* The path to show for the main executable whose real path is real: the
 * path it was started by when that is absolute and opens the same file
 * (a link), else real. Stats both. */
const char *program_main_path(const char *real);

#endif
