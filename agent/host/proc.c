/*
 * /proc and small-file reads for the whole agent (agent/proc.h has the
 * contract). One copy of what the run directory, the threads profile, the
 * CPU profiler, the maps reader and the fork policy each did for itself.
 */
#include "agent/proc.h"

#include "agent/agent.h"
#include "agent/fds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t proc_read(const char *path, char *buf, size_t size)
{
    if (size == 0)
        return -EINVAL;
    int fd = fds_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, size - 1);
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
    size_t cap = 16384, len = 0;
    char *buf = malloc(cap);
    int err = 0;
    if (!buf) {
        err = -ENOMEM;
        goto out;
    }
    for (;;) {
        if (cap - len < 4096) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                err = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
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
    free(buf);
    fds_close(fd);
    return err;
}

int proc_thread_name(int tid, char *out, size_t size)
{
    if (size == 0)
        return -EINVAL;
    char path[64];
    log_snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    ssize_t n = proc_read(path, out, size);
    if (n <= 0) {
        out[0] = '\0';
        return n < 0 ? (int)n : -ENOENT;
    }
    if (out[n - 1] == '\n')
        out[--n] = '\0';
    return (int)n;
}

char proc_thread_state(int tid, char *name, size_t size)
{
    char path[64], buf[512];
    log_snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    if (name && size)
        name[0] = '\0';
    if (proc_read(path, buf, sizeof buf) <= 0)
        return '?';
    /* "tid (name) S ...": the name may hold spaces and parentheses, so it
     * ends at the last ")". */
    char *open = strchr(buf, '('), *close = strrchr(buf, ')');
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

int proc_list(const char *dir, int (*fn)(void *arg, int n, int dir_fd),
              void *arg)
{
    DIR *d = fds_opendir(dir);
    if (!d)
        return -errno;
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
