// Benchmark host for the futex interposer (test/bench/contention.sh):
// N lock+unlock pairs of a free std::sync::Mutex, whose uncontended path
// is one atomic exchange each way and never calls the futex system call.
// Prints "ns_per_pair=X" (the loop's thread CPU time / N).
//
//   futex_bench_rust N
use std::sync::Mutex;
use std::time::Duration;

static MU: Mutex<u64> = Mutex::new(0);

#[no_mangle]
#[inline(never)]
pub extern "C" fn uncontended_loop(n: u64) {
    for _ in 0..n {
        let mut g = MU.lock().unwrap();
        *g += 1;
    }
}

fn thread_cpu_ns() -> u64 {
    // No libc crate here: CLOCK_THREAD_CPUTIME_ID through the C library.
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    let mut ts = Timespec { sec: 0, nsec: 0 };
    unsafe { clock_gettime(3, &mut ts) };
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10_000_000);
    // A second thread, as in a service (and as the C benchmark has).
    std::thread::spawn(|| loop {
        std::thread::sleep(Duration::from_secs(3600));
    });
    uncontended_loop(n / 10);
    let t0 = thread_cpu_ns();
    uncontended_loop(n);
    let t1 = thread_cpu_ns();
    println!("ns_per_pair={:.3}", (t1 - t0) as f64 / n as f64);
}
