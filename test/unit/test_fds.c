/*
 * The descriptor protocol (agent/host/fds.c) seen from the program's side: the
 * calls below are the interposed close, close_range, closefrom, dup2 and
 * dup3 (linked in from the agent's objects), made by a thread that is not
 * the agent's.
 */
#include "agent/host/fds.h"
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int held[2] = {-1, -1};

static int is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

/* 1 when fd is the read end of the pipe whose write end is w. */
static int same_pipe(int r, int w)
{
    char c = 'x', got = 0;
    if (write(w, &c, 1) != 1)
        return 0;
    return read(r, &got, 1) == 1 && got == 'x';
}

TEST(moved_high_and_registered)
{
    assert_true(fds_pipe(held, O_CLOEXEC | O_NONBLOCK) == 0);
    expect_true(held[0] >= fds_floor() && held[1] >= fds_floor());
    expect_true(fcntl(held[0], F_GETFD) & FD_CLOEXEC);
    expect_true(same_pipe(held[0], held[1]));
    expect_int_eq(fds_count(), 2);
    expect_int_eq(fds_check(held[0]), 0);
}

TEST(close_is_refused_as_if_not_open)
{
    errno = 0;
    expect_int_eq(close(held[0]), -1);
    expect_int_eq(errno, EBADF);
    expect_true(is_open(held[0]));
}

TEST(close_range_and_closefrom_close_around)
{
    /* Descriptors of the program just below, between and above. */
    int below = fcntl(0, F_DUPFD, held[0] - 1);
    int above = fcntl(0, F_DUPFD, held[1] + 1);
    int low = dup(0);
    assert_true(below >= 0 && above >= 0 && low >= 0);
    expect_int_eq(close_range(3, ~0U, 0), 0);
    expect_true(!is_open(below) && !is_open(above) && !is_open(low));
    expect_true(is_open(held[0]) && is_open(held[1]));
    below = fcntl(0, F_DUPFD, held[0] - 1);
    low = dup(0);
    closefrom(3);
    expect_true(!is_open(below) && !is_open(low));
    expect_true(same_pipe(held[0], held[1]));
    /* A range refused by the kernel is refused the same. */
    errno = 0;
    expect_int_eq(close_range(10, 5, 0), -1);
    expect_int_eq(errno, EINVAL);
}

TEST(dup2_onto_a_held_number_moves_it)
{
    int n = held[0];
    int mine = open("/dev/null", O_RDONLY);
    assert_true(mine >= 0);
    expect_int_eq(dup2(mine, n), n);
    /* n is the program's now; the agent's pipe lives on elsewhere. */
    struct stat a, b;
    expect_true(fstat(n, &a) == 0 && fstat(mine, &b) == 0 &&
                a.st_ino == b.st_ino);
    expect_true(held[0] != n && held[0] >= fds_floor());
    expect_true(same_pipe(held[0], held[1]));
    expect_int_eq(close(n), 0); /* the program's to close */
    int m = held[1];
    expect_int_eq(dup3(mine, m, O_CLOEXEC), m);
    expect_true(held[1] != m && same_pipe(held[0], held[1]));
    expect_int_eq(close(m), 0);
    close(mine);
    /* Duplicating the agent's descriptor: not open, for the program. */
    errno = 0;
    expect_int_eq(dup2(held[0], 100), -1);
    expect_int_eq(errno, EBADF);
}

TEST(agent_close_releases)
{
    expect_int_eq(fds_close(held[0]), 0);
    expect_int_eq(fds_close(held[1]), 0);
    expect_int_eq(fds_count(), 0);
    expect_true(!is_open(held[0]));
    /* An ordinary close is untouched. */
    int fd = dup(0);
    expect_int_eq(close(fd), 0);
    errno = 0;
    expect_int_eq(close(fd), -1);
    expect_int_eq(errno, EBADF);
}

int main(void)
{
    return run_tests(moved_high_and_registered, close_is_refused_as_if_not_open,
                     close_range_and_closefrom_close_around,
                     dup2_onto_a_held_number_moves_it, agent_close_releases,
                     NULL);
}
