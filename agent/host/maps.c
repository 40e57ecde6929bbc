/*
 * maps.c owns the parsing of /proc/self/maps: it turns the text into the
 * list of executable entries that become profile mappings, in the kernel's
 * order; and of /proc/self/smaps and smaps_rollup, for /debug/memory
 * (agent/heap/memory.h). It is entered only from the agent's own threads, under the
 * symbolizer lock, while a profile is built; it allocates and must never be
 * called from a signal handler or an interposed call.
 */
#include "agent/symbols/symbols.h"
#include "agent/core/real.h"

#include "agent/core/array.h"
#include "agent/heap/memory.h"
#include "agent/host/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char deleted_suffix[] = " (deleted)";

/* Parses one line; returns 1 for an executable entry worth keeping. */
static int parse_line(char *line, struct maps_entry *e)
{
    unsigned long start, limit, offset, major, minor, inode;
    char perms[8];
    int pos = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %lx:%lx %lu %n", &start, &limit, perms,
               &offset, &major, &minor, &inode, &pos) < 7)
        return 0;
    if (strlen(perms) < 3 || perms[2] != 'x')
        return 0;
    char *path = pos > 0 ? line + pos : line + strlen(line);
    while (*path == ' ')
        path++;
    size_t plen = strlen(path);
    /* Anonymous executable memory (JIT code) has no file to describe it. */
    if (plen == 0 && inode == 0)
        return 0;
    int deleted = 0;
    size_t slen = sizeof deleted_suffix - 1;
    if (plen > slen && strcmp(path + plen - slen, deleted_suffix) == 0) {
        plen -= slen;
        deleted = 1;
    }
    e->path = strndup(path, plen);
    if (!e->path)
        return -ENOMEM;
    e->start = start;
    e->limit = limit;
    e->offset = offset;
    e->dev = ((uint64_t)major << 32) | minor;
    e->inode = inode;
    e->deleted = deleted;
    return 1;
}

int maps_read(struct maps_entry **out, size_t *n)
{
    char *text = NULL;
    int err = proc_slurp("/proc/self/maps", &text);
    if (err)
        return err;
    struct maps_entry *v = NULL;
    size_t count = 0, cap = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        err = ARRAY_RESERVE(v, cap, count + 1, 32);
        if (err)
            break;
        int r = parse_line(line, &v[count]);
        if (r < 0) {
            err = r;
            break;
        }
        count += (size_t)r;
    }
    real_free(text);
    if (err) {
        maps_free(v, count);
        return err;
    }
    *out = v;
    *n = count;
    return 0;
}

void maps_free(struct maps_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        real_free(e[i].path);
    real_free(e);
}

/* ---- smaps ------------------------------------------------------------------ */

/* "Name:   123 kB" -> bytes; -1 when line is not that field. */
static int64_t kb_field(const char *line, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(line, name, n) != 0 || line[n] != ':')
        return -1;
    return (int64_t)strtoll(line + n + 1, NULL, 10) * 1024;
}

int maps_read_smaps(struct smaps_entry **out, size_t *n)
{
    char *text = NULL;
    int err = proc_slurp("/proc/self/smaps", &text);
    if (err)
        return err;
    struct smaps_entry *v = NULL, *cur = NULL;
    size_t count = 0, cap = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        unsigned long start, limit;
        char perms[8];
        int pos = 0;
        /* A header line: "start-limit perms offset dev inode [path]". */
        if (sscanf(line, "%lx-%lx %7s %*x %*x:%*x %*u %n", &start, &limit,
                   perms, &pos) == 3 && pos > 0) {
            err = ARRAY_RESERVE(v, cap, count + 1, 256);
            if (err)
                break;
            cur = &v[count++];
            memset(cur, 0, sizeof *cur);
            cur->start = start;
            cur->limit = limit;
            memcpy(cur->perms, perms, 4);
            const char *path = line + pos;
            while (*path == ' ')
                path++;
            cur->named = *path != '\0';
            if (strcmp(path, "[heap]") == 0)
                cur->kind = SMAPS_HEAP;
            else if (strncmp(path, "[stack", 6) == 0)
                cur->kind = SMAPS_STACK;
            else if (*path == '/')
                cur->kind = SMAPS_FILE;
            continue;
        }
        if (!cur)
            continue;
        int64_t b;
        if ((b = kb_field(line, "Rss")) >= 0)
            cur->rss = b;
        else if ((b = kb_field(line, "Anonymous")) >= 0)
            cur->anonymous = b;
    }
    real_free(text);
    if (err) {
        real_free(v);
        return err;
    }
    *out = v;
    *n = count;
    return 0;
}

int maps_read_rollup(struct smaps_rollup *out)
{
    char *text = NULL;
    int err = proc_slurp("/proc/self/smaps_rollup", &text);
    if (err)
        return err;
    *out = (struct smaps_rollup){-1, -1, -1, -1, -1, -1};
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        int64_t b;
        if ((b = kb_field(line, "Rss")) >= 0)
            out->rss = b;
        else if ((b = kb_field(line, "Pss")) >= 0)
            out->pss = b;
        else if ((b = kb_field(line, "Anonymous")) >= 0)
            out->anon = b;
        else if ((b = kb_field(line, "Pss_File")) >= 0)
            ; /* Rss_File is not in smaps_rollup: file = Rss - anon - shmem */
        else if ((b = kb_field(line, "Shmem")) >= 0 && out->shmem < 0)
            out->shmem = b;
        else if ((b = kb_field(line, "Swap")) >= 0)
            out->swap = b;
    }
    real_free(text);
    if (out->rss < 0 || out->anon < 0)
        return -EIO;
    if (out->shmem < 0)
        out->shmem = 0;
    out->file = out->rss - out->anon - out->shmem;
    if (out->file < 0)
        out->file = 0;
    return 0;
}
