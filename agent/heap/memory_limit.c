/*
 * The memory limit the process lives under, as the kernel's out-of-memory
 * killer will apply it: this process's memory cgroup (from
 * /proc/self/cgroup) and its ancestors, the smallest of cgroup v2's
 * memory.max and memory.high (above high the kernel throttles and
 * reclaims hard; a service rarely lives long there) or of v1's
 * memory.limit_in_bytes; what is charged to that cgroup now; and the
 * pressure the kernel reports. Read by the shell's watch (process/watch.c)
 * on the agent's own thread; a few small file reads each time.
 */
#include "agent/heap/memory.h"
#include "agent/core/real.h"

#include "agent/log.h"
#include "agent/host/proc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A v1 limit this large is "no limit" (the kernel's page-rounded
 * LLONG_MAX). */
#define V1_UNLIMITED (1LL << 62)

static int64_t read_bytes(const char *dir, const char *file)
{
    char path[640], buf[64];
    log_snprintf(path, sizeof path, "%s/%s", dir, file);
    if (proc_read(path, buf, sizeof buf) <= 0)
        return -1;
    if (strncmp(buf, "max", 3) == 0)
        return -1;
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (end == buf || v < 0)
        return -1;
    return v;
}

/* The smallest limit of dir (a cgroup folder) and its ancestors down to
 * root (the mount point), into out. */
static void smallest(struct memory_limit *out, int version, const char *root,
                     const char *path)
{
    char dir[512];
    log_snprintf(dir, sizeof dir, "%s%s", root, path);
    size_t rootlen = strlen(root);
    for (;;) {
        static const char *const v2[] = {"memory.max", "memory.high"};
        static const char *const v1[] = {"memory.limit_in_bytes"};
        const char *const *files = version == 2 ? v2 : v1;
        size_t nfiles = version == 2 ? 2 : 1;
        for (size_t i = 0; i < nfiles; i++) {
            int64_t v = read_bytes(dir, files[i]);
            if (v <= 0 || (version == 1 && v >= V1_UNLIMITED))
                continue;
            if (!out->version || v < out->limit) {
                out->version = version;
                out->limit = v;
                log_snprintf(out->dir, sizeof out->dir, "%s", dir);
                log_snprintf(out->file, sizeof out->file, "%s", files[i]);
            }
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < rootlen)
            break;
        *slash = '\0';
    }
}

/* 1 when line (of /proc/self/cgroup: "id:controllers:path") names the
 * memory controller (v1) or is the v2 line ("0::path"); *path set. */
static int cgroup_line(char *line, int *version, char **path)
{
    char *c1 = strchr(line, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2)
        return 0;
    *c2 = '\0';
    *path = c2 + 1;
    if (c1[1] == '\0') {
        *version = 2;
        return 1;
    }
    for (char *tok = strtok(c1 + 1, ","); tok; tok = strtok(NULL, ","))
        if (strcmp(tok, "memory") == 0) {
            *version = 1;
            return 1;
        }
    return 0;
}

int memory_limit_find(struct memory_limit *out)
{
    memset(out, 0, sizeof *out);
    char *text;
    if (proc_slurp("/proc/self/cgroup", &text) != 0)
        return -ENOENT;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        int version;
        char *path;
        if (!cgroup_line(line, &version, &path))
            continue;
        if (strcmp(path, "/") == 0)
            path = "";
        /* Where each hierarchy is mounted on the usual layouts: v2 alone
         * at /sys/fs/cgroup, or beside v1 at /sys/fs/cgroup/unified. */
        if (version == 2) {
            smallest(out, 2, "/sys/fs/cgroup", path);
            smallest(out, 2, "/sys/fs/cgroup/unified", path);
        } else {
            smallest(out, 1, "/sys/fs/cgroup/memory", path);
        }
    }
    real_free(text);
    return out->version ? 0 : -ENOENT;
}

int64_t memory_limit_usage(const struct memory_limit *l)
{
    if (!l->version)
        return -1;
    return read_bytes(l->dir, l->version == 2 ? "memory.current"
                                              : "memory.usage_in_bytes");
}

void memory_limit_pressure(const struct memory_limit *l, char *out,
                           size_t size)
{
    char path[640];
    out[0] = '\0';
    if (l->version == 2) {
        log_snprintf(path, sizeof path, "%s/memory.pressure", l->dir);
        if (proc_read(path, out, size) <= 0)
            out[0] = '\0';
    }
    if (!out[0] && proc_read("/proc/pressure/memory", out, size) <= 0)
        out[0] = '\0';
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = '\0';
}
