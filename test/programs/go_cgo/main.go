// A Go program built with cgo (so dynamically linked, so LD_PRELOAD applies)
// that serves Go's own net/http/pprof, for test/integration/go_cgo.sh.
//
// One goroutine, locked to its thread ("c-burner"), calls C and never
// comes back: the C burner spends three parts of its CPU in c_hot_a and one in c_hot_b
// (the same spin loop, counted in rounds). Another goroutine, locked to its
// thread too ("go-burner"), spins in Go (goHot). Neither makes a system call while it
// works: on SIGUSR1 (delivered through os/signal) the main goroutine reads
// both threads' CPU clocks from outside and prints
//
//	c_a=<ns> c_b=<ns> go=<ns> c_tid=<tid> go_tid=<tid>
//
// (the C thread's CPU since start split between c_hot_a and c_hot_b by
// the rounds each ran). SIGUSR2 (os/signal too) makes it exit with
// status 7; a real-time signal N prints "rt=N". It prints
// "pprof=<host:port>" once Go's server listens and both burners run.
package main

/*
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long c_sink;
static long c_rounds_a, c_rounds_b;
static int c_tid;

// The same loop in both, inlined: each is where its CPU goes.
static inline __attribute__((always_inline)) void c_spin(long n)
{
	unsigned long x = c_sink;
	for (long i = 0; i < n; i++)
		x = x * 2862933555777941757ULL + 3037000493ULL;
	c_sink = x;
}

__attribute__((noinline)) void c_hot_a(long n) { c_spin(n); }
__attribute__((noinline)) void c_hot_b(long n) { c_spin(n); }

__attribute__((noinline)) void c_burn(void)
{
	prctl(PR_SET_NAME, "c-burner");
	__atomic_store_n(&c_tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
	for (;;) {
		c_hot_a(300000);
		__atomic_fetch_add(&c_rounds_a, 3, __ATOMIC_RELAXED);
		c_hot_b(100000);
		__atomic_fetch_add(&c_rounds_b, 1, __ATOMIC_RELAXED);
	}
}

static void name_go_burner(void) { prctl(PR_SET_NAME, "go-burner"); }
static int c_burner_tid(void) { return __atomic_load_n(&c_tid, __ATOMIC_ACQUIRE); }
static long c_a(void) { return __atomic_load_n(&c_rounds_a, __ATOMIC_RELAXED); }
static long c_b(void) { return __atomic_load_n(&c_rounds_b, __ATOMIC_RELAXED); }

// Thread tid's CPU clock (the kernel's MAKE_THREAD_CPUCLOCK(tid, SCHED)).
static long long tid_cpu_ns(int tid)
{
	struct timespec ts;
	clockid_t id = (clockid_t)(((unsigned)~tid << 3) | 6);
	if (clock_gettime(id, &ts) != 0)
		return -1;
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
*/
import "C"

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

var goTid atomic.Int32
var goSink uint64

//go:noinline
func goHot(n int) {
	x := goSink
	for i := 0; i < n; i++ {
		x = x*2862933555777941757 + 3037000493
	}
	goSink = x
}

// goRound has a frame (it calls): a walk by frame pointers from the
// frameless leaf goHot goes through it to goBurn.
//
//go:noinline
func goRound() {
	goHot(1000000)
}

func goBurn() {
	runtime.LockOSThread()
	C.name_go_burner()
	goTid.Store(int32(syscall.Gettid()))
	for {
		goRound()
	}
}

func cBurn() {
	runtime.LockOSThread()
	C.c_burn()
}

func main() {
	go cBurn()
	go goBurn()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go http.Serve(ln, nil)
	for C.c_burner_tid() == 0 || goTid.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
	}

	// Every real-time signal Go lets a program have: each one received
	// is printed as "rt=<n>" (the test sends one on the signal the agent
	// chained in front of Go's handler).
	rt := make(chan os.Signal, 64)
	for n := 35; n <= 64; n++ {
		signal.Notify(rt, syscall.Signal(n))
	}
	go func() {
		for s := range rt {
			fmt.Printf("rt=%d\n", int(s.(syscall.Signal)))
		}
	}()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	fmt.Printf("pprof=%s\n", ln.Addr())
	var totalA, totalB float64
	var lastCPU int64
	var lastA, lastB int64
	for s := range sigs {
		if s == syscall.SIGUSR2 {
			fmt.Println("exiting 7")
			os.Exit(7)
		}
		tid := C.c_burner_tid()
		cpu := int64(C.tid_cpu_ns(tid))
		a, b := int64(C.c_a()), int64(C.c_b())
		if da, db := a-lastA, b-lastB; da+db > 0 {
			d := float64(cpu - lastCPU)
			totalA += d * float64(da) / float64(da+db)
			totalB += d * float64(db) / float64(da+db)
		}
		lastCPU, lastA, lastB = cpu, a, b
		gcpu := int64(C.tid_cpu_ns(C.int(goTid.Load())))
		fmt.Printf("c_a=%.0f c_b=%.0f go=%d c_tid=%d go_tid=%d\n",
			totalA, totalB, gcpu, tid, goTid.Load())
	}
}
