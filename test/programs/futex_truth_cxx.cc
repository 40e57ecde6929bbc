// Test host for contention in C++'s standard locks, with waits measured
// here. One thread holds (or signals) in a named function, another waits in
// a named function, 10 ms per round:
//   std::mutex             holder_work / waiter_work        mutex_wait_ns
//   std::shared_mutex      rw_writer_work / rw_reader_work  rwlock_wait_ns
//   std::timed_mutex       timed_holder_work / timed_waiter_work
//                          (try_lock_for)                   timed_wait_ns
//   std::condition_variable (wait_for)
//                          cond_notifier_work / cond_waiter_work cond_wait_ns
//   std::binary_semaphore  sem_release_work / sem_waiter_work    sem_wait_ns
//                          (60 ms a round)
// The semaphore waits in libstdc++'s atomic wait, the futex system call
// through syscall(). Prints the measurements and "done", then waits for the
// file named by its second argument, prints its counters and exits with
// status 5.
//
//   futex_truth_cxx ROUNDS STOP_FILE
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <semaphore>
#include <shared_mutex>
#include <unistd.h>

#include "rounds.h"

using namespace std::chrono;

static std::atomic<long> counter{0};

static long since_ns(steady_clock::time_point t0)
{
    return (long)duration_cast<nanoseconds>(steady_clock::now() - t0).count();
}

// ---- std::mutex --------------------------------------------------------------

static std::mutex mu;
static long mutex_wait_ns;

__attribute__((noinline)) static void holder_work(int round)
{
    mu.lock();
    round_announce(round);
    sleep_us(10000);
    mu.unlock();
    counter++;
}

__attribute__((noinline)) static void waiter_work()
{
    auto t0 = steady_clock::now();
    mu.lock();
    mutex_wait_ns += since_ns(t0);
    mu.unlock();
}

// ---- std::shared_mutex -------------------------------------------------------

static std::shared_mutex rw;
static long rwlock_wait_ns;

__attribute__((noinline)) static void rw_writer_work(int round)
{
    rw.lock();
    round_announce(round);
    sleep_us(10000);
    rw.unlock();
    counter++;
}

__attribute__((noinline)) static void rw_reader_work()
{
    auto t0 = steady_clock::now();
    rw.lock_shared();
    rwlock_wait_ns += since_ns(t0);
    rw.unlock_shared();
}

// ---- std::timed_mutex ----------------------------------------------------------

static std::timed_mutex tm;
static long timed_wait_ns;

__attribute__((noinline)) static void timed_holder_work(int round)
{
    tm.lock();
    round_announce(round);
    sleep_us(10000);
    tm.unlock();
    counter++;
}

__attribute__((noinline)) static void timed_waiter_work()
{
    auto t0 = steady_clock::now();
    if (tm.try_lock_for(seconds(10))) {
        timed_wait_ns += since_ns(t0);
        tm.unlock();
    }
}

// ---- std::condition_variable ----------------------------------------------------

static std::mutex cv_mu;
static std::condition_variable cv;
static bool cv_ready;
static long cond_wait_ns;

__attribute__((noinline)) static void cond_notifier_work(int round)
{
    round_announce(round);
    sleep_us(10000);
    {
        std::lock_guard<std::mutex> g(cv_mu);
        cv_ready = true;
        cv.notify_one();
    }
    counter++;
}

__attribute__((noinline)) static void cond_waiter_work()
{
    std::unique_lock<std::mutex> g(cv_mu);
    while (!cv_ready) {
        auto t0 = steady_clock::now();
        cv.wait_for(g, seconds(10));
        cond_wait_ns += since_ns(t0);
    }
    cv_ready = false;
}

// ---- std::binary_semaphore -------------------------------------------------------

static std::binary_semaphore sem{0};
static long sem_wait_ns;

__attribute__((noinline)) static void sem_release_work(int round)
{
    round_announce(round);
    // 60 ms, not 10: the semaphore's waiter spins and yields before its
    // futex wait, and on a busy machine that phase alone can last 10 ms.
    sleep_us(60000);
    sem.release();
    counter++;
}

__attribute__((noinline)) static void sem_waiter_work()
{
    auto t0 = steady_clock::now();
    sem.acquire();
    sem_wait_ns += since_ns(t0);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    const char *stop = argc > 2 ? argv[2] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);

    run_rounds(rounds, holder_work, waiter_work);
    printf("mutex_wait_ns=%ld\n", mutex_wait_ns);
    run_rounds(rounds, rw_writer_work, rw_reader_work);
    printf("rwlock_wait_ns=%ld\n", rwlock_wait_ns);
    run_rounds(rounds, timed_holder_work, timed_waiter_work);
    printf("timed_wait_ns=%ld\n", timed_wait_ns);
    run_rounds(rounds, cond_notifier_work, cond_waiter_work);
    printf("cond_wait_ns=%ld\n", cond_wait_ns);
    run_rounds(rounds, sem_release_work, sem_waiter_work);
    printf("sem_wait_ns=%ld\n", sem_wait_ns);
    printf("done\n");

    while (stop[0] && access(stop, F_OK) != 0)
        sleep_us(20000);
    printf("counter=%ld\n", counter.load());
    return 5;
}
