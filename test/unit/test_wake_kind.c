/*
 * Unit tests for encoder/wake_kind.c: which futex wakes count as lock
 * releases, from the waker's function names. The "stacks" are addresses
 * inside this binary's own functions, named as the code that issues wakes
 * is (a mutex's unlock, a condition's notify, a parker's unpark).
 */
#include "encoder/encoder.h"

#include "harness.h"

#define FN(name)                                                               \
    static __attribute__((noinline, used)) int name(int x)                     \
    {                                                                          \
        volatile int acc = x;                                                  \
        for (int i = 0; i < x; i++)                                            \
            acc += i * 7;                                                      \
        return acc;                                                            \
    }

FN(plain_helper)
FN(plain_caller)
FN(demo_mutex_wake)
FN(demo_Condvar_notify_one)
FN(demo_condvar_wait_with_mutex_guard)
FN(demo_unpark_one)
FN(demo_RawMutex_unlock_slow)
FN(demo_Condvar_notify_one_slow)
FN(demo_FnOnce_call_once)
FN(demo_semaphore_release)

/* A location inside fn, as stacks hold them. */
#define AT(fn) ((uintptr_t)(fn) + 4)

TEST(innermost_lock_name_keeps)
{
    uintptr_t pcs[] = {AT(plain_helper), AT(demo_mutex_wake),
                       AT(demo_Condvar_notify_one)};
    expect_int_eq(contention_wake_is_lock(pcs, 3), 1);
}

TEST(innermost_condition_name_drops)
{
    uintptr_t pcs[] = {AT(plain_helper), AT(demo_Condvar_notify_one),
                       AT(demo_mutex_wake)};
    expect_int_eq(contention_wake_is_lock(pcs, 3), 0);
    uintptr_t sem[] = {AT(demo_semaphore_release), AT(plain_caller)};
    expect_int_eq(contention_wake_is_lock(sem, 2), 0);
}

TEST(condition_first_within_one_frame)
{
    uintptr_t pcs[] = {AT(demo_condvar_wait_with_mutex_guard)};
    expect_int_eq(contention_wake_is_lock(pcs, 1), 0);
}

TEST(parker_frames_defer_to_the_next)
{
    uintptr_t lock[] = {AT(demo_unpark_one), AT(demo_RawMutex_unlock_slow)};
    expect_int_eq(contention_wake_is_lock(lock, 2), 1);
    uintptr_t cond[] = {AT(demo_unpark_one), AT(demo_Condvar_notify_one_slow)};
    expect_int_eq(contention_wake_is_lock(cond, 2), 0);
}

TEST(no_name_keeps)
{
    uintptr_t pcs[] = {AT(plain_helper), AT(plain_caller)};
    expect_int_eq(contention_wake_is_lock(pcs, 2), 1);
    expect_int_eq(contention_wake_is_lock(pcs, 0), 1);
}

TEST(only_the_innermost_frames_count)
{
    /* Every Rust stack passes through FnOnce::call_once: not a one-time
     * initialization. And a condition six frames out is the program's,
     * not the waker's. */
    uintptr_t once[] = {AT(plain_helper), AT(demo_FnOnce_call_once)};
    expect_int_eq(contention_wake_is_lock(once, 2), 1);
    uintptr_t far[] = {AT(plain_helper), AT(plain_caller), AT(plain_helper),
                       AT(plain_caller), AT(plain_helper), AT(plain_caller),
                       AT(demo_Condvar_notify_one)};
    expect_int_eq(contention_wake_is_lock(far, 7), 1);
}

int main(void)
{
    return run_tests(innermost_lock_name_keeps, innermost_condition_name_drops,
                     condition_first_within_one_frame,
                     parker_frames_defer_to_the_next, no_name_keeps,
                     only_the_innermost_frames_count, NULL);
}
