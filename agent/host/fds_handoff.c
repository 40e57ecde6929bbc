/*
 * civetweb connections handed to threads of the agent's own. A request
 * that waits for seconds (http/handoff.c) is answered by a thread that
 * ends with it, so that civetweb's fixed pool of workers stays free for
 * quick requests. The thread writes on a duplicate of civetweb's socket,
 * made here in the agent's range and registered as FDS_HELD
 * (docs/descriptors.md), while civetweb's worker returns at once and
 * closes the connection as it closes every one (close_socket_gracefully):
 * blocking mode back on, shutdown(SHUT_WR), close. No linger is set
 * (linger_timeout_ms is left unset), and the close only drops civetweb's
 * number, the duplicate keeping the connection open; the shutdown would
 * end the response before it is written, since it acts on the connection
 * and not on one descriptor. So the number is marked here, and the
 * shutdown interposer (fds.c) skips civetweb's shutdown of a marked number
 * and removes the mark.
 *
 * A mark is the number and the socket's identity (device, inode), so a
 * mark left behind (the host took the number over with dup2, and
 * civetweb's shutdown never reached the socket) never matches another
 * connection that gets the number later; the hand-off thread removes its
 * mark when it ends in any case.
 *
 * Contexts: fds_hand_off on civetweb's worker threads, fds_hand_off_end on
 * hand-off threads and in the fork child handler, fds_handed_take in the
 * shutdown interposer on any thread. Marks are claimed and released with
 * atomic operations; nothing here takes a lock or allocates.
 */
#include "agent/host/fds.h"

#include "agent/compiler.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Marks at once: well above the hand-off threads' bound (8), so that
 * marks left behind cannot use them up. */
#define HANDED_MAX 32

struct mark {
    int fd1; /* fd + 1; 0 free, -1 being filled */
    dev_t dev;
    ino_t ino;
};

static struct mark marks[HANDED_MAX];
static int marked; /* marks in use: the interposer's fast check */

static void release(struct mark *m, int fd1)
{
    if (__atomic_compare_exchange_n(&m->fd1, &fd1, 0, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
        __atomic_fetch_sub(&marked, 1, __ATOMIC_RELAXED);
}

int fds_hand_off(int fd, int *holder)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return -EBADF;
    struct mark *m = NULL;
    for (int i = 0; i < HANDED_MAX && !m; i++) {
        int free_ = 0;
        if (__atomic_compare_exchange_n(&marks[i].fd1, &free_, -1, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            m = &marks[i];
    }
    if (!m)
        return -ENOSPC;
    fds_begin();
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, fds_floor());
    if (dup < 0) /* the range is full: anywhere, registered all the same */
        dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    int err = dup < 0 ? -errno : 0;
    if (dup >= 0)
        fds_adopt(dup, FDS_HELD, holder);
    fds_end();
    if (err) {
        __atomic_store_n(&m->fd1, 0, __ATOMIC_RELEASE);
        return err;
    }
    m->dev = st.st_dev;
    m->ino = st.st_ino;
    __atomic_fetch_add(&marked, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&m->fd1, fd + 1, __ATOMIC_RELEASE);
    return 0;
}

void fds_hand_off_end(int *holder)
{
    int fd = __atomic_load_n(holder, __ATOMIC_ACQUIRE);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0)
        for (int i = 0; i < HANDED_MAX; i++) {
            int fd1 = __atomic_load_n(&marks[i].fd1, __ATOMIC_ACQUIRE);
            if (fd1 > 0 && marks[i].ino == st.st_ino &&
                marks[i].dev == st.st_dev)
                release(&marks[i], fd1);
        }
    __atomic_store_n(holder, -1, __ATOMIC_RELEASE);
    fds_close(fd);
}

int fds_handed_take(int fd)
{
    if (likely(!__atomic_load_n(&marked, __ATOMIC_RELAXED)) || fd < 0)
        return 0;
    int found = 0;
    struct stat st;
    int known = -1; /* fstat of fd, done once: 1 ok, 0 failed */
    for (int i = 0; i < HANDED_MAX; i++) {
        if (__atomic_load_n(&marks[i].fd1, __ATOMIC_ACQUIRE) != fd + 1)
            continue;
        if (known < 0)
            known = fstat(fd, &st) == 0;
        int same =
            known && marks[i].ino == st.st_ino && marks[i].dev == st.st_dev;
        /* Either way the mark goes: taken, or left behind by a socket
         * that had this number before. */
        release(&marks[i], fd + 1);
        found |= same;
    }
    return found;
}
