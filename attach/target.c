/*
 * The target as /proc shows it: its mappings, its status fields, the
 * thread to stop, its files as it sees them. Reads only.
 */
#include "attach/attach.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *file_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* One line of /proc/PID/maps into m; 0, or -1 when it names no file. */
static int parse_line(const char *line, struct mapping *m)
{
    unsigned long start, end;
    unsigned long long offset, inode;
    char perms[8];
    int pos = 0;
    if (sscanf(line, "%lx-%lx %7s %llx %*s %llu %n", &start, &end, perms,
               &offset, &inode, &pos) < 5 ||
        pos == 0 || line[pos] != '/')
        return -1;
    /* The code of a loaded object: the same file mapped for reading only
     * (the agent's symbolizer reads its own ELF file so) is no object. */
    if (perms[2] != 'x')
        return -1;
    m->start = start;
    m->end = end;
    m->offset = offset;
    m->inode = inode;
    snprintf(m->path, sizeof m->path, "%s", line + pos);
    m->path[strcspn(m->path, "\n")] = '\0';
    return 0;
}

int target_code_mappings(pid_t pid, void (*fn)(const struct mapping *, void *),
                         void *arg)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(name, "re");
    if (!f)
        return -1;
    char line[4300];
    struct mapping m;
    while (fgets(line, sizeof line, f))
        if (parse_line(line, &m) == 0 && !strstr(m.path, " (deleted)"))
            fn(&m, arg);
    fclose(f);
    return 0;
}

struct wanted {
    const char *prefix;
    uint64_t inode;
    struct mapping *out;
    int found;
};

static void match(const struct mapping *m, void *arg)
{
    struct wanted *w = arg;
    if (!w->found && (w->inode ? m->inode == w->inode
                               : strncmp(file_name(m->path), w->prefix,
                                         strlen(w->prefix)) == 0)) {
        *w->out = *m;
        w->found = 1;
    }
}

int target_find_mapping(pid_t pid, const char *prefix, uint64_t inode,
                        struct mapping *out)
{
    struct wanted w = {prefix, inode, out, 0};
    return target_code_mappings(pid, match, &w) == 0 && w.found ? 0 : -1;
}

int target_maps_contain(pid_t pid, const char *s)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(name, "re");
    if (!f)
        return 0;
    char line[4300];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, s) != NULL;
    fclose(f);
    return found;
}

static int status_of(const char *file, const char *field, char *out,
                     size_t size)
{
    FILE *f = fopen(file, "re");
    if (!f)
        return -1;
    char line[512];
    size_t n = strlen(field);
    int err = -1;
    while (err && fgets(line, sizeof line, f)) {
        if (strncmp(line, field, n) != 0 || line[n] != ':')
            continue;
        const char *v = line + n + 1;
        v += strspn(v, " \t");
        snprintf(out, size, "%s", v);
        out[strcspn(out, "\n")] = '\0';
        err = 0;
    }
    fclose(f);
    return err;
}

int target_status(pid_t pid, const char *field, char *out, size_t size)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/status", (int)pid);
    return status_of(name, field, out, size);
}

int target_thread_status(pid_t pid, pid_t tid, const char *field, char *out,
                         size_t size)
{
    char name[96];
    snprintf(name, sizeof name, "/proc/%d/task/%d/status", (int)pid, (int)tid);
    return status_of(name, field, out, size);
}

pid_t target_thread(pid_t pid)
{
    char name[96], state[64];
    snprintf(name, sizeof name, "/proc/%d/task/%d/status", (int)pid, (int)pid);
    if (status_of(name, "State", state, sizeof state) == 0 && state[0] != 'Z')
        return pid;
    snprintf(name, sizeof name, "/proc/%d/task", (int)pid);
    DIR *d = opendir(name);
    if (!d)
        return -1;
    pid_t tid = -1;
    struct dirent *e;
    while (tid < 0 && (e = readdir(d)) != NULL) {
        pid_t t = (pid_t)atoi(e->d_name);
        if (t <= 0 || t == pid)
            continue;
        char file[128];
        snprintf(file, sizeof file, "/proc/%d/task/%d/status", (int)pid, (int)t);
        if (status_of(file, "State", state, sizeof state) == 0 &&
            state[0] != 'Z')
            tid = t;
    }
    closedir(d);
    return tid;
}

void target_path(pid_t pid, const char *path, char *out, size_t size)
{
    snprintf(out, size, "/proc/%d/root%s", (int)pid, path);
}
