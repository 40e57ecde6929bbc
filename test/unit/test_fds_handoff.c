/*
 * A civetweb connection handed to an agent thread (agent/fds_handoff.c):
 * the duplicate lives in the agent's range and is registered, civetweb's
 * shutdown of its own number is skipped once (its close drops only that
 * number), and a mark never matches a later socket that gets the number.
 * This program declares itself one of the agent's libraries, so that its
 * shutdown calls stand for civetweb's.
 */
#include "agent/host/fds.h"
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int holder = -1;

/* What arrived at fd now: the bytes (NUL-terminated in buf), "" at end
 * of stream, NULL when nothing is there yet. */
static const char *arrived(int fd, char *buf, size_t size)
{
    ssize_t n = recv(fd, buf, size - 1, MSG_DONTWAIT);
    if (n < 0)
        return NULL;
    buf[n] = '\0';
    return buf;
}

TEST(duplicate_outlives_civetwebs_graceful_close)
{
    int sv[2];
    char buf[64];
    assert_true(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int before = fds_count();
    assert_true(fds_hand_off(sv[0], &holder) == 0);
    expect_true(holder >= fds_floor());
    expect_true(fcntl(holder, F_GETFD) & FD_CLOEXEC);
    expect_int_eq(fds_count(), before + 1);
    /* civetweb's close: shutdown skipped, then its number closed. */
    expect_int_eq(shutdown(sv[0], SHUT_WR), 0);
    expect_true(arrived(sv[1], buf, sizeof buf) == NULL); /* no FIN */
    expect_int_eq(close(sv[0]), 0);
    expect_true(arrived(sv[1], buf, sizeof buf) == NULL);
    /* The agent thread answers on the duplicate, then ends it. */
    expect_int_eq((int)send(holder, "response", 8, MSG_NOSIGNAL), 8);
    expect_true(arrived(sv[1], buf, sizeof buf) &&
                strcmp(buf, "response") == 0);
    expect_int_eq(shutdown(holder, SHUT_WR), 0);
    expect_true(arrived(sv[1], buf, sizeof buf) && buf[0] == '\0');
    fds_hand_off_end(&holder);
    expect_int_eq(holder, -1);
    expect_int_eq(fds_count(), before);
    close(sv[1]);
}

TEST(shutdown_skipped_once)
{
    int sv[2];
    char buf[64];
    assert_true(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    assert_true(fds_hand_off(sv[0], &holder) == 0);
    expect_int_eq(shutdown(sv[0], SHUT_WR), 0);
    expect_true(arrived(sv[1], buf, sizeof buf) == NULL);
    expect_int_eq(shutdown(sv[0], SHUT_WR), 0); /* this one is real */
    expect_true(arrived(sv[1], buf, sizeof buf) && buf[0] == '\0');
    fds_hand_off_end(&holder);
    close(sv[0]);
    close(sv[1]);
}

TEST(mark_never_matches_a_later_socket)
{
    int sv[2], t[2];
    char buf[64];
    assert_true(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    assert_true(fds_hand_off(sv[0], &holder) == 0);
    int n = sv[0];
    /* The number goes past civetweb's shutdown (a raw close), and another
     * connection gets it. */
    syscall(SYS_close, n);
    assert_true(socketpair(AF_UNIX, SOCK_STREAM, 0, t) == 0);
    if (t[0] != n) { /* the kernel gives the lowest free number */
        assert_true(dup2(t[0], n) == n);
        close(t[0]);
    }
    expect_int_eq(shutdown(n, SHUT_WR), 0);
    expect_true(arrived(t[1], buf, sizeof buf) && buf[0] == '\0');
    /* The handed-off connection is untouched. */
    expect_true(arrived(sv[1], buf, sizeof buf) == NULL);
    fds_hand_off_end(&holder);
    expect_true(arrived(sv[1], buf, sizeof buf) && buf[0] == '\0');
    close(n);
    close(t[1]);
    close(sv[1]);
}

TEST(only_sockets)
{
    int p[2];
    assert_true(pipe(p) == 0);
    int h = -1;
    expect_int_eq(fds_hand_off(p[0], &h), -EBADF);
    expect_int_eq(fds_hand_off(-1, &h), -EBADF);
    expect_int_eq(h, -1);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    fds_own_library((const void *)main);
    return run_tests(duplicate_outlives_civetwebs_graceful_close,
                     shutdown_skipped_once, mark_never_matches_a_later_socket,
                     only_sockets, NULL);
}
