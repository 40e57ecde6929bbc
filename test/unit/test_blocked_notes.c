/*
 * Unit tests for agent/threads/blocked_notes.c: a thread's note is seen by
 * another thread while it is open and not after, with the frame record
 * of the function that opened it; a nested enter leaves the outer note
 * alone; nothing is noted before noting starts; a fork child's generation
 * hides the parent's slots. (The walk from a note is covered by
 * test/integration/undumpable_stacks.sh.)
 */
#include "agent/threads/blocked.h"

#include "harness.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

static int pipe_fds[2];
static int waiter_tid;
static uintptr_t waiter_frame;

static void real_wait(void)
{
}

/* Opens a note, then waits on the pipe until main writes. */
__attribute__((noinline)) static int noted_wait(void)
{
    int n = BLOCKED_ENTER(SYS_read, real_wait);
    waiter_frame = (uintptr_t)__builtin_frame_address(0);
    __atomic_store_n(&waiter_tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
    char c;
    ssize_t r = read(pipe_fds[0], &c, 1);
    BLOCKED_LEAVE(n);
    return n && r == 1;
}

static void *waiter(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)noted_wait();
}

TEST(nothing_noted_before_noting_starts)
{
    int n = BLOCKED_ENTER(SYS_read, real_wait);
    expect_int_eq(n, 0);
    struct blocked_note note;
    expect_int_eq(blocked_note_read((int)syscall(SYS_gettid), &note), 0);
}

TEST(open_note_seen_then_closed)
{
    blocked_notes_switch_on();
    assert_true(pipe(pipe_fds) == 0);
    pthread_t t;
    assert_true(pthread_create(&t, NULL, waiter, NULL) == 0);
    while (!__atomic_load_n(&waiter_tid, __ATOMIC_ACQUIRE))
        usleep(1000);
    struct blocked_note note;
    expect_int_eq(blocked_note_read(waiter_tid, &note), 1);
    expect_int_eq(note.seq & 3, 2);
    expect_true(note.nr == SYS_read);
    expect_true(note.fn == (uintptr_t)real_wait);
    /* The record of noted_wait: its return address and the stack pointer
     * after it returns. */
    expect_true(note.cfa == waiter_frame + 2 * sizeof(uintptr_t));
    expect_true(note.ret == ((uintptr_t *)waiter_frame)[1]);
    expect_true(blocked_note_seq(waiter_tid) == note.seq);
    assert_true(write(pipe_fds[1], "x", 1) == 1);
    void *ok;
    pthread_join(t, &ok);
    expect_true(ok == (void *)1);
    /* Closed when its call returned. */
    expect_int_eq(blocked_note_read(waiter_tid, &note), 0);
}

__attribute__((noinline)) static int nested(void)
{
    return BLOCKED_ENTER(SYS_futex, real_wait);
}

TEST(nested_enter_leaves_outer)
{
    int tid = (int)syscall(SYS_gettid);
    int outer = BLOCKED_ENTER(SYS_read, real_wait);
    expect_int_eq(outer, 1);
    struct blocked_note a, b;
    expect_int_eq(blocked_note_read(tid, &a), 1);
    /* A hook below the open one (a signal handler's write in a read). */
    expect_int_eq(nested(), 0);
    expect_int_eq(blocked_note_read(tid, &b), 1);
    expect_true(a.seq == b.seq && b.nr == SYS_read);
    BLOCKED_LEAVE(outer);
    expect_int_eq(blocked_note_read(tid, &b), 0);
}

TEST(fork_child_hides_parent_slots)
{
    int tid = (int)syscall(SYS_gettid);
    int n = BLOCKED_ENTER(SYS_read, real_wait);
    expect_int_eq(n, 1);
    struct blocked_note note;
    blocked_notes_fork_child(); /* as in a child: a new generation */
    expect_int_eq(blocked_note_read(tid, &note), 0);
    /* The old note's leave does nothing to the new generation. */
    BLOCKED_LEAVE(n);
    n = BLOCKED_ENTER(SYS_read, real_wait);
    expect_int_eq(n, 1);
    expect_int_eq(blocked_note_read(tid, &note), 1);
    BLOCKED_LEAVE(n);
    expect_int_eq(blocked_note_read(tid, &note), 0);
}

int main(void)
{
    return run_tests(nothing_noted_before_noting_starts,
                     open_note_seen_then_closed, nested_enter_leaves_outer,
                     fork_child_hides_parent_slots, NULL);
}
