/*
 * The program's name as its user started it. A program is often started
 * through a link (Debian's /usr/bin/redis-server is a link to
 * redis-check-rdb): /proc/self/exe and the maps name the file the link
 * points to, which is not what anyone typed. The kernel keeps the file
 * name execve was given (AT_EXECFN); it is copied here when the agent
 * loads (a string copy: no system call, no allocation), before a program
 * that rewrites its argv and environment for a process title can reach
 * the area, and read by the pages and profiles: the name on the flame
 * graph, the main mapping's path (which opens the same file), the names
 * of unnamed code.
 *
 * The copy is written once by the constructor, read by the agent's own
 * threads. Not async-signal-safe (program_main_path stats files).
 */
#include "agent/host/proc.h"
#include "agent/compiler.h"

#include <limits.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>

static char started[PATH_MAX];

STARTUP void program_copy(void)
{
    const char *fn = (const char *)getauxval(AT_EXECFN);
    if (fn) /* as far as the name goes: no page of padding touched */
        memcpy(started, fn, strnlen(fn, sizeof started - 1));
}

const char *program_name(void)
{
    const char *slash = strrchr(started, '/');
    const char *base = slash ? slash + 1 : started;
    if (base[0])
        return base;
    static char comm[32];
    if (!comm[0] && proc_read("/proc/self/comm", comm, sizeof comm) > 0)
        comm[strcspn(comm, "\n")] = '\0';
    return comm[0] ? comm : "process";
}

const char *program_main_path(const char *real)
{
    struct stat a, b;
    if (started[0] != '/' || !real || stat(started, &a) != 0 ||
        stat(real, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return real;
    return started;
}
