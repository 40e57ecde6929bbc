// Test host for futex-based contention: Rust's std::sync::Mutex, RwLock and
// Condvar (built on the futex system call through libc's syscall(), never
// on pthread_mutex_lock), with waits measured here.
//
// Phase 1: holder_work holds a Mutex for 20 ms at a time while two threads
// wait for it in waiter_work. Phase 2: rw_writer_work holds the write lock
// of an RwLock for 10 ms while rw_reader_work waits to read. Phase 3:
// cond_waiter_work waits on a Condvar that cond_notifier_work signals every
// 10 ms. The waiters' own measurements are printed as "mutex_wait_ns=N",
// "rwlock_wait_ns=N", "cond_wait_ns=N"; then "done", and the program waits
// until the file named by its second argument exists, prints the counters
// and exits with status 3.
//
//   futex_truth_rust ROUNDS STOP_FILE
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

static MU: Mutex<u64> = Mutex::new(0);
static HELD: AtomicBool = AtomicBool::new(false);
static FINISHED: AtomicBool = AtomicBool::new(false);
static EXITED: AtomicUsize = AtomicUsize::new(0);
static HELD_ROUNDS: AtomicUsize = AtomicUsize::new(0);
static MUTEX_WAIT_NS: AtomicU64 = AtomicU64::new(0);

static RW: RwLock<u64> = RwLock::new(0);
static WRITE_ROUND: AtomicUsize = AtomicUsize::new(0);
static READS: AtomicUsize = AtomicUsize::new(0);
static RWLOCK_WAIT_NS: AtomicU64 = AtomicU64::new(0);

static CV_MU: Mutex<bool> = Mutex::new(false);
static CV: Condvar = Condvar::new();
static COND_WAIT_NS: AtomicU64 = AtomicU64::new(0);

fn sleep_us(us: u64) {
    thread::sleep(Duration::from_micros(us));
}

#[inline(never)]
fn holder_work() {
    let mut g = MU.lock().unwrap();
    HELD.store(true, SeqCst);
    sleep_us(20_000);
    *g += 1;
    HELD.store(false, SeqCst);
    drop(g);
    // Work after the unlock keeps this frame on the stack: an unlock in
    // tail position becomes a jump, and its waker's stack would start at
    // the caller.
    HELD_ROUNDS.fetch_add(1, SeqCst);
}

#[inline(never)]
fn waiter_work() {
    let t0 = Instant::now();
    let g = MU.lock().unwrap();
    let ns = t0.elapsed().as_nanos() as u64;
    drop(g);
    MUTEX_WAIT_NS.fetch_add(ns, SeqCst);
}

fn waiter() {
    while !FINISHED.load(SeqCst) {
        while !HELD.load(SeqCst) && !FINISHED.load(SeqCst) {
            sleep_us(200);
        }
        if FINISHED.load(SeqCst) {
            break;
        }
        waiter_work();
        // Let the holder take the lock again before waiting once more.
        while HELD.load(SeqCst) && !FINISHED.load(SeqCst) {
            sleep_us(100);
        }
        sleep_us(1000);
    }
    EXITED.fetch_add(1, SeqCst);
}

#[inline(never)]
fn rw_writer_work(round: usize) {
    let mut g = RW.write().unwrap();
    WRITE_ROUND.store(round, SeqCst);
    sleep_us(10_000);
    *g += 1;
    drop(g);
    HELD_ROUNDS.fetch_add(1, SeqCst);
}

#[inline(never)]
fn rw_reader_work() -> u64 {
    let t0 = Instant::now();
    let g = RW.read().unwrap();
    let ns = t0.elapsed().as_nanos() as u64;
    let v = *g;
    drop(g);
    RWLOCK_WAIT_NS.fetch_add(ns, SeqCst);
    v
}

#[inline(never)]
fn cond_waiter_work() {
    let mut g = CV_MU.lock().unwrap();
    while !*g {
        let t0 = Instant::now();
        g = CV.wait(g).unwrap();
        COND_WAIT_NS.fetch_add(t0.elapsed().as_nanos() as u64, SeqCst);
    }
    *g = false;
}

#[inline(never)]
fn cond_notifier_work() {
    let mut g = CV_MU.lock().unwrap();
    *g = true;
    CV.notify_one();
    drop(g);
    HELD_ROUNDS.fetch_add(1, SeqCst);
}

// Waits (sleeping, never blocking on a lock) until n threads have exited:
// thread::join would itself be a wait in the block profile.
fn wait_exited(n: usize) {
    while EXITED.load(SeqCst) < n {
        sleep_us(1000);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(40);
    let stop = args.get(2).cloned().unwrap_or_default();

    for _ in 0..2 {
        thread::spawn(waiter);
    }
    for _ in 0..rounds {
        holder_work();
        sleep_us(3000);
    }
    FINISHED.store(true, SeqCst);
    wait_exited(2);
    println!("mutex_wait_ns={}", MUTEX_WAIT_NS.load(SeqCst));

    let rounds2 = 20;
    thread::spawn(move || {
        let mut sum = 0;
        for i in 1..=rounds2 {
            while WRITE_ROUND.load(SeqCst) < i {
                sleep_us(200);
            }
            sum += rw_reader_work();
            READS.store(i, SeqCst);
        }
        println!("reader_sum={}", sum);
        EXITED.fetch_add(1, SeqCst);
    });
    for i in 1..=rounds2 {
        rw_writer_work(i);
        while READS.load(SeqCst) < i {
            sleep_us(100);
        }
        sleep_us(3000);
    }
    wait_exited(3);
    println!("rwlock_wait_ns={}", RWLOCK_WAIT_NS.load(SeqCst));

    thread::spawn(move || {
        for _ in 0..rounds2 {
            cond_waiter_work();
        }
        EXITED.fetch_add(1, SeqCst);
    });
    for _ in 0..rounds2 {
        sleep_us(10_000);
        cond_notifier_work();
        // The waiter consumes the flag before the next signal.
        while *CV_MU.lock().unwrap() {
            sleep_us(100);
        }
    }
    wait_exited(4);
    println!("cond_wait_ns={}", COND_WAIT_NS.load(SeqCst));
    println!("done");

    while !stop.is_empty() && !std::path::Path::new(&stop).exists() {
        sleep_us(20_000);
    }
    println!(
        "mutex_count={} rwlock_count={} rounds={}",
        *MU.lock().unwrap(),
        *RW.read().unwrap(),
        HELD_ROUNDS.load(SeqCst)
    );
    std::process::exit(3);
}
