/*
 * Which Debian package owns a file, so that the index can name the
 * -dbgsym package that would give a stripped object its names. dpkg keeps
 * the files of each installed package in /var/lib/dpkg/info/PKG.list (or
 * PKG:ARCH.list), one path a line; the lists are read here, once for all
 * the paths asked at a time (a few MB: tens of milliseconds, on the agent's
 * own thread that answers the index, never on the host's), and the
 * answers kept, so a page shown again reads nothing. Paths are matched as
 * dpkg wrote them and with /usr moved (merged-/usr systems map
 * /usr/lib/... where the package lists /lib/...).
 *
 * Entered from HTTP workers; a mutex serializes them (one that finds it
 * taken gives no names rather than wait). Not async-signal-safe.
 */
#include "agent/symbols/symbols.h"
#include "agent/core/real.h"

#include "agent/host/fds.h"
#include "agent/log.h"
#include "agent/host/proc.h"

#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PKG_DIR "/var/lib/dpkg/info"
#define PKG_CACHE 128

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *path;
    char *pkg; /* NULL: no package owns it */
} cache[PKG_CACHE];
static size_t ncache;

/* 1 when the list text holds path as a whole line. */
static int lists(const char *text, const char *path)
{
    size_t len = strlen(path);
    for (const char *p = strstr(text, path); p; p = strstr(p + 1, path))
        if ((p == text || p[-1] == '\n') && (p[len] == '\n' || !p[len]))
            return 1;
    return 0;
}

/* The other spelling of path on a merged-/usr system, into alt; 0 when
 * it has none. */
static int other_spelling(const char *path, char *alt, size_t size)
{
    static const char *const dirs[] = {"/lib/", "/lib64/", "/bin/", "/sbin/"};
    if (strncmp(path, "/usr/", 5) == 0) {
        for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
            if (strncmp(path + 4, dirs[i], strlen(dirs[i])) == 0)
                return log_snprintf(alt, size, "%s", path + 4) > 0;
        return 0;
    }
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (strncmp(path, dirs[i], strlen(dirs[i])) == 0)
            return log_snprintf(alt, size, "/usr%s", path) > 0;
    return 0;
}

static size_t cached(const char *path)
{
    for (size_t i = 0; i < ncache; i++)
        if (strcmp(cache[i].path, path) == 0)
            return i;
    return SIZE_MAX;
}

/* Reads every list once, giving each path in want (cache indexes) its
 * package. */
static void scan(const size_t *want, size_t nwant)
{
    DIR *d = fds_opendir(PKG_DIR);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".list") != 0)
            continue;
        char file[512], *text = NULL;
        log_snprintf(file, sizeof file, "%s/%s", PKG_DIR, e->d_name);
        if (proc_slurp(file, &text) != 0)
            continue;
        for (size_t k = 0; k < nwant; k++) {
            char alt[4096];
            size_t i = want[k];
            if (cache[i].pkg ||
                (!lists(text, cache[i].path) &&
                 !(other_spelling(cache[i].path, alt, sizeof alt) &&
                   lists(text, alt))))
                continue;
            /* "redis-tools.list", "libc6:amd64.list": the package. */
            size_t n = strcspn(e->d_name, ":");
            if (n > len - 5)
                n = len - 5;
            cache[i].pkg = strndup(e->d_name, n);
        }
        real_free(text);
    }
    fds_closedir(d);
}

void symbols_packages(const char *const *paths, size_t n, const char **pkgs)
{
    size_t want[PKG_CACHE], nwant = 0;
    /* Busy (another page, or a fork child of a process whose thread held
     * it): no names this time rather than a wait. */
    if (real_pthread_mutex_trylock(&lock) != 0) {
        for (size_t i = 0; i < n; i++)
            pkgs[i] = NULL;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (cached(paths[i]) != SIZE_MAX || ncache == PKG_CACHE)
            continue;
        cache[ncache].path = strdup(paths[i]);
        cache[ncache].pkg = NULL;
        if (cache[ncache].path)
            want[nwant++] = ncache++;
    }
    if (nwant)
        scan(want, nwant);
    for (size_t i = 0; i < n; i++) {
        size_t k = cached(paths[i]);
        pkgs[i] = k == SIZE_MAX ? NULL : cache[k].pkg;
    }
    real_pthread_mutex_unlock(&lock);
}
