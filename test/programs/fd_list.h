/*
 * For the descriptor test programs: the descriptors this process has open
 * (above 2), read from /proc/self/fd.
 */
#ifndef PPROF_TEST_FD_LIST_H
#define PPROF_TEST_FD_LIST_H

#include <dirent.h>
#include <stdlib.h>

/* Fills out[] with at most max open descriptors above 2 (not the one the
 * listing itself uses); returns how many. */
static int fd_list(int *out, int max)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);
        if (fd >= 3 && fd != dirfd(d) && n < max)
            out[n++] = fd;
    }
    if (d)
        closedir(d);
    return n;
}

#endif
