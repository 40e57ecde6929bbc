/*
 * The CPU profiling signal handler, and nothing else.
 *
 * Context: signal context on any host thread, interrupting any instruction
 * (malloc, the dynamic loader, the agent's own hooks). It must
 * only make async-signal-safe calls, take no lock of its own, never wait
 * for anything the interrupted thread may hold, never allocate, and leave
 * errno as it found it.
 *
 * How it stays safe: the stack is walked with the unwind tables of
 * agent/stacks/cfi_tables.c (agent/stacks/stack_signal.c, agent/stacks/cfi_walk.c), which take
 * no lock, make no system call, never allocate and never call into the
 * loader, and whose every stack read is checked against the thread's
 * stack bounds. So the thread can be walked wherever it was interrupted:
 * inside the dynamic loader, the allocator, a dlclose, or the agent itself
 * (even inside another walk: the walker keeps no state of its own).
 *
 * Samples go to a preallocated lock-free buffer; when it is full the
 * sample's weight is added to the lost counter, which the profile shows.
 */
#include "agent/cpu/cpu.h"
#include "agent/core/real.h"

#include "agent/compiler.h"
#include "agent/guard.h"
#include "agent/core/labels.h"
#include "agent/host/signals.h"
#include "agent/stacks/stack.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>

struct cpu_counters cpu_counters;
__thread int cpu_in_handler __attribute__((tls_model("initial-exec")));
__thread uint64_t cpu_periods_taken __attribute__((tls_model("initial-exec")));
__thread uint32_t cpu_periods_owed __attribute__((tls_model("initial-exec")));
/* Samples this thread takes before it times one (the handler's own cost,
 * for the profile's comment): two clock reads are a fifth of a sample's
 * cost, so one sample in CPU_TIME_EVERY pays them. */
#define CPU_TIME_EVERY 16
static __thread unsigned char untimed __attribute__((tls_model("initial-exec")));
__thread struct cpu_perf_self cpu_perf_self __attribute__((tls_model("initial-exec")));
int cpu_profile_gen;

void cpu_signal_init(void)
{
    /* The tables are built by stack_init and kept current by dlclose,
     * each profile's start and drain, and captures outside signals. */
}

static PPROF_SIGNAL_SAFE uint32_t unwind(ucontext_t *uc, uintptr_t *pcs)
{
    return stack_unwind_signal(uc, pcs, CPU_STACK_MAX);
}

static inline uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO, async-signal-safe */
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* a system call */
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * The periods a perf event's overflow stands for. With kernel time
 * counted: 1. User time only, from the thread's CPU clock: whole periods
 * since its first overflow (less the stretches its
 * event was paused, cpu_timer.c), minus those already taken. Usually 1;
 * more when overflows were lost: an overflow while the thread was in the
 * kernel with a user-time-only event (dropped by the kernel), or one that
 * met the previous signal still pending. 0: nothing due (skip it).
 */
static PPROF_SIGNAL_SAFE uint32_t perf_weight(void)
{
    struct cpu_perf_self *t = &cpu_perf_self;
    int gen = __atomic_load_n(&cpu_profile_gen, __ATOMIC_RELAXED);
    /* With kernel time counted, every overflow is delivered (the handler
     * runs before the next one could meet it pending): no clock read. */
    if (t->gen == gen && !t->by_clock)
        return 1;
    int64_t now = thread_cpu_ns();
    int64_t period = cpu_period_ns;
    if (t->gen != gen) {
        t->gen = gen;
        t->tid = (uint32_t)real_syscall(SYS_gettid);
        t->anchor = now;
        t->taken = 1;
        t->paused_at = -1;
        t->by_clock = cpu_perf_user_only;
        return 1;
    }
    uint64_t due = (uint64_t)((now - t->anchor + period / 2) / period) + 1;
    if (due <= t->taken)
        return 0;
    uint64_t w = due - t->taken;
    t->taken = due;
    return (uint32_t)(w < 1000 ? w : 1000);
}

static PPROF_SIGNAL_SAFE void cpu_signal_take(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    int saved_errno = errno;
    /* Only our timers' expiries and our perf events' overflows reach here
     * (the handler sent the host's deliveries on: signals.h); one late,
     * or on an agent thread, is dropped. */
    int perf = si->si_code == POLL_IN;
    if (agent_tls.agent_thread ||
        !__atomic_load_n(&cpu_active, __ATOMIC_RELAXED)) {
        errno = saved_errno;
        return;
    }
    int timed = ++untimed == CPU_TIME_EVERY;
    uint64_t t0 = 0;
    if (unlikely(timed)) {
        untimed = 0;
        t0 = mono_ns();
    }
    uint32_t weight, tid;
    if (perf) {
        weight = perf_weight();
        /* Overflows the mask interposers discarded (sigmask_hooks.c):
         * already in the clock's account when it is read. */
        if (weight && !cpu_perf_self.by_clock)
            weight += cpu_periods_owed;
        cpu_periods_owed = 0;
        tid = cpu_perf_self.tid;
        if (weight == 0) {
            errno = saved_errno;
            return;
        }
    } else {
        weight = 1 + (uint32_t)(si->si_overrun > 0 ? si->si_overrun : 0);
        weight += cpu_periods_owed; /* cpu_timer.c's resume */
        cpu_periods_owed = 0;
        tid = (uint32_t)(uintptr_t)si->si_value.sival_ptr;
    }
    cpu_periods_taken += weight;
    ucontext_t *uc = ucv;

    struct cpu_sample *s = cpu_ringbuf_claim();
    if (!s) {
        __atomic_fetch_add(&cpu_counters.lost, weight, __ATOMIC_RELAXED);
        errno = saved_errno;
        return;
    }
    s->tid = tid;
    s->ns = (int64_t)mono_ns();
    s->weight = weight;
    s->labels = labels_current_id(); /* this thread's own TLS: a plain read */
    s->depth = unwind(uc, s->pcs);
    if (s->depth == 0) {
        /* The thread's stack bounds are unknown (a thread the agent did
         * not see start): the PC only. */
        s->pcs[0] = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
        s->depth = 1;
    }
    cpu_ringbuf_commit(s);
    __atomic_fetch_add(&cpu_counters.handled, 1, __ATOMIC_RELAXED);
    if (unlikely(timed)) {
        uint64_t dt = mono_ns() - t0;
        __atomic_fetch_add(&cpu_counters.handler_ns, dt, __ATOMIC_RELAXED);
        __atomic_fetch_add(&cpu_counters.timed, 1, __ATOMIC_RELAXED);
        uint64_t b = dt / CPU_HIST_STEP_NS;
        __atomic_fetch_add(&cpu_counters.hist[b < CPU_HIST_BUCKETS
                                                  ? b
                                                  : CPU_HIST_BUCKETS - 1],
                           1, __ATOMIC_RELAXED);
    }
    errno = saved_errno;
}

PPROF_SIGNAL_SAFE void cpu_signal_handler(int sig, siginfo_t *si, void *ucv)
{
    /* Anything else on this signal (a kill, a timer of the host's, an
     * O_ASYNC file of the host's) is the host's: to the handler the agent
     * chained in front of, if any. */
    signals_dispatch(SIGNALS_CPU, cpu_signal_take, sig, si, ucv);
}
