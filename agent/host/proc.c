/*
 * /proc and small-file reads for the whole agent (agent/host/proc.h has the
 * contract). One copy of what the run directory, the threads profile, the
 * CPU profiler, the maps reader and the fork policy each did for itself.
 */
#include "agent/host/proc.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/core/array.h"
#include "agent/config.h"
#include "agent/host/fds.h"
#include "agent/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

ssize_t proc_read(const char *path, char *buf, size_t size)
{
    if (size == 0)
        return -EINVAL;
    int fd = fds_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = real_read(fd, buf, size - 1);
    int err = errno;
    fds_close(fd);
    if (n < 0)
        return -err;
    buf[n] = '\0';
    return n;
}

int proc_slurp(const char *path, char **out)
{
    int fd = fds_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t cap = 0, len = 0;
    char *buf = NULL;
    int err = 0;
    for (;;) {
        /* At least 4 KiB free for each read. */
        err = ARRAY_RESERVE(buf, cap, len + 4096, 16384);
        if (err)
            goto out;
        ssize_t r = real_read(fd, buf + len, cap - len - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            err = -errno;
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    *out = buf;
    buf = NULL;
out:
    real_free(buf);
    fds_close(fd);
    return err;
}

int proc_thread_name(int tid, char *out, size_t size)
{
    if (size == 0)
        return -EINVAL;
    ssize_t n = proc_task_read(NULL, tid, "comm", out, size);
    if (n <= 0) {
        out[0] = '\0';
        return n < 0 ? (int)n : -ENOENT;
    }
    if (out[n - 1] == '\n')
        out[--n] = '\0';
    return (int)n;
}

unsigned long long proc_stat_field(int pid, int n)
{
    char path[64], buf[1024];
    log_snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (proc_read(path, buf, sizeof buf) <= 0)
        return 0;
    /* The command name is in parentheses and may hold anything: count the
     * fields after its last ')'. */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
        return 0;
    int field = 2;
    for (; *p; p++)
        if (*p == ' ' && ++field == n)
            return strtoull(p + 1, NULL, 10);
    return 0;
}

char proc_parse_stat(const char *buf, char *name, size_t size)
{
    if (name && size)
        name[0] = '\0';
    /* "tid (name) S ...": the name may hold spaces and parentheses, so it
     * ends at the last ")". */
    const char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    if (!open || !close || close < open || close[1] != ' ' || !close[2])
        return '?';
    if (name && size) {
        size_t len = (size_t)(close - open - 1);
        if (len > size - 1)
            len = size - 1;
        memcpy(name, open + 1, len);
        name[len] = '\0';
    }
    return close[2];
}

char proc_thread_state(int tid, char *name, size_t size)
{
    char buf[512];
    if (name && size)
        name[0] = '\0';
    if (proc_task_read(NULL, tid, "stat", buf, sizeof buf) <= 0)
        return '?';
    return proc_parse_stat(buf, name, size);
}

int proc_list(const char *dir, int (*fn)(void *arg, int n, int dir_fd),
              void *arg)
{
    DIR *d = fds_opendir(dir);
    if (!d) {
        int err = -errno;
        /* Chrooted: the threads from the book (proc_book.c). */
        if (__atomic_load_n(&proc_book_on, __ATOMIC_ACQUIRE) &&
            strcmp(dir, "/proc/self/task") == 0)
            return proc_book_list(fn, arg);
        return err;
    }
    int r = 0;
    struct dirent *de;
    while (r == 0 && (de = readdir(d)) != NULL) {
        long n;
        if (config_parse_long(de->d_name, 0, 0x7fffffff, &n) == 0)
            r = fn(arg, (int)n, dirfd(d));
    }
    fds_closedir(d);
    return r;
}

/* ---- the threads folder held open ---------------------------------------- */

int proc_tasks_open(int *fd)
{
    fds_begin();
    int d = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int err = d < 0 ? -errno : 0;
    if (d >= 0)
        fds_adopt(d, FDS_HELD, fd);
    fds_end();
    return err;
}

FORK_PATH void proc_tasks_close(int *fd)
{
    int d = __atomic_load_n(fd, __ATOMIC_ACQUIRE);
    if (d >= 0)
        fds_close(d);
    if (d != -1) /* a fork child's step: no write for nothing */
        __atomic_store_n(fd, -1, __ATOMIC_RELEASE);
}

ssize_t proc_task_read(const int *fd, int tid, const char *file, char *buf,
                       size_t size)
{
    if (size == 0)
        return -EINVAL;
    if (!fd || __atomic_load_n(fd, __ATOMIC_ACQUIRE) < 0) {
        char path[64];
        log_snprintf(path, sizeof path, "/proc/self/task/%d/%s", tid, file);
        return proc_read(path, buf, size);
    }
    char rel[48];
    log_snprintf(rel, sizeof rel, "%d/%s", tid, file);
    /* Bracketed whole: no host close/dup2 acts on the number until it is
     * closed again (see proc.h). */
    fds_begin();
    ssize_t n;
    int d = __atomic_load_n(fd, __ATOMIC_ACQUIRE);
    int f = d >= 0 ? openat(d, rel, O_RDONLY | O_CLOEXEC) : -1;
    if (f < 0) {
        n = d >= 0 ? -errno : -EBADF;
    } else {
        n = real_read(f, buf, size - 1);
        if (n < 0)
            n = -errno;
        /* Past the close interposer, which would wait for fds_end. */
        real_syscall(SYS_close, f);
    }
    fds_end();
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

int proc_tasks_check(int *fd)
{
    int d = __atomic_load_n(fd, __ATOMIC_ACQUIRE);
    if (d >= 0 && fds_check(d) != 0) {
        /* The number is the host's now: forgotten, never closed. */
        __atomic_store_n(fd, -1, __ATOMIC_RELEASE);
        d = -1;
    }
    return d >= 0 ? 0 : -EBADF;
}

long proc_tasks_count(const int *fd)
{
    int d = __atomic_load_n(fd, __ATOMIC_ACQUIRE);
    if (d < 0)
        return -EBADF;
    struct stat st;
    if (fstat(d, &st) != 0)
        return -errno;
    return st.st_nlink >= 2 ? (long)st.st_nlink - 2 : 0;
}
