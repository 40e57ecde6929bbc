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

/* Calls fn(arg, n, dir_fd) for each entry of folder dir whose name is a
 * number in [0, INT_MAX] (thread ids in /proc/self/task, descriptors in
 * /proc/self/fd), in readdir order; dir_fd is the listing's own
 * descriptor. Stops early when fn returns non-zero. Returns that value, 0,
 * or -errno when dir cannot be opened. */
int proc_list(const char *dir, int (*fn)(void *arg, int n, int dir_fd),
              void *arg);

#endif
