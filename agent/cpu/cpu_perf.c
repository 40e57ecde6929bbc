/*
 * The CPU sampler's choice, and the per-thread task-clock perf events.
 *
 * A POSIX timer on a thread's CPU clock (cpu_timer.c) expires on time, but
 * the kernel notices the expiry only at its tick, and only while the
 * thread runs. On a machine with more runnable threads than CPUs a thread
 * is mostly switched out at the return of a system call; an expiry its
 * CPU time crossed just before is then delivered when it runs again, in
 * the code after the system call. A thread alternating between two
 * functions 3:1 with a clock read between them read 80-97% for the first
 * beside CPU hogs (docs/cpu.md). A software perf event on the thread's
 * task clock (PERF_COUNT_SW_TASK_CLOCK, pid = the thread, any CPU) counts
 * with a high-resolution timer that runs only while the thread does and
 * stops and resumes with it: it overflows mid-slice, where the thread is.
 * Its overflow is sent as our profiling signal to the thread itself
 * (O_ASYNC, F_SETSIG, F_SETOWN_EX with F_OWNER_TID), with si_code POLL_IN
 * and si_fd the event's descriptor: that is how the handler tells it from
 * anything else (cpu_signal.c).
 *
 * The choice is made here once per profile (cpu_sampler_choose): the perf
 * event when PPROF_CPU_SAMPLER allows it and a probe on the calling thread
 * succeeds; with kernel time when the system allows (perf_event_paranoid
 * <= 1 or CAP_PERFMON), else user time only (paranoid 2: an overflow that
 * falls in the kernel is dropped by the kernel, and the handler weighs the
 * periods it missed into the next sample, see cpu_signal.c); else the
 * timer, with the reason. A thread whose event cannot be opened (more than
 * CPU_PERF_MAX threads, no descriptor free) gets a timer instead. Nothing
 * is opened once the host installed a system-call filter (agent/guard.h):
 * a sandbox may kill the caller of a system call it does not expect.
 *
 * Only with SIGPROF: the kernel sends a real-time F_SETSIG signal that
 * finds its queue full as SIGIO instead, whose default action ends the
 * program; a non-real-time signal is never refused.
 *
 * Descriptors: one per thread while the profile runs, created with
 * close-on-exec, moved to the agent's high numbers and registered as held
 * (agent/host/fds.c, docs/descriptors.md), the number kept in the thread's
 * registry entry; closed when the thread exits or the profile stops.
 *
 * Contexts: the slot holder's HTTP worker (choose, open for existing
 * threads, close at stop), host threads (open for themselves at start,
 * pause/resume from the mask interposers, close at exit). Nothing here
 * runs in a signal handler but cpu_perf_is_ours.
 */
#include "agent/cpu/cpu.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/host/fds.h"
#include "agent/guard.h"
#include "agent/log.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int cpu_sampler = CPU_SAMPLER_TIMER;
int cpu_perf_user_only;
uint64_t cpu_perf_fds[CPU_PERF_FDS / 64];

/* The shortest period an event gets: 1 ms (1000 Hz), a hundred times the
 * kernel's floor for restarting the overflow's timer (see attr_fill). */
#define CPU_PERF_MIN_PERIOD_NS 1000000

static char why[192] = "timer: no CPU profile yet";
static int live; /* events open now (at most CPU_PERF_MAX) */
static int perf_threads, timer_threads;

/* The attributes of every event: the thread's task clock, an overflow
 * every period ns, not counting until enabled. Never a shorter first
 * period to place the first overflow at random: the kernel restarts a
 * task-clock overflow's timer at least 10 us ahead, and the thread's
 * clock runs in the kernel too, so a thread whose handling of one
 * overflow (the work the kernel queues to send the signal, on the way
 * back from a system call) takes longer than its period never returns to
 * its own code, and holds whatever lock it held. The random phase lives
 * in the settlement's first_at only (cpu_timer.c). */
static void attr_fill(struct perf_event_attr *a, int64_t period, int user_only)
{
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->type = PERF_TYPE_SOFTWARE;
    a->config = PERF_COUNT_SW_TASK_CLOCK;
    a->sample_period = (uint64_t)period;
    a->disabled = 1;
    a->exclude_kernel = (unsigned)user_only;
    a->exclude_hv = 1;
}

/* perf_event_open on tid (0: the calling thread). A descriptor or -errno. */
static int open_raw(int tid, int user_only)
{
    struct perf_event_attr a;
    attr_fill(&a, cpu_period_ns, user_only);
    long fd = real_syscall(SYS_perf_event_open, &a, tid, -1, -1,
                      PERF_FLAG_FD_CLOEXEC);
    return fd >= 0 ? (int)fd : -errno;
}

/* Opens and closes one event on the calling thread. 0 or -errno. */
static int probe(int user_only)
{
    fds_begin();
    int fd = open_raw(0, user_only);
    if (fd >= 0)
        fd = fds_adopt(fd, FDS_TRANSIENT, NULL);
    fds_end();
    if (fd < 0)
        return fd;
    fds_close(fd);
    return 0;
}

/* kernel.perf_event_paranoid, or -100 when it cannot be read. */
static int paranoid(void)
{
    char buf[16] = "";
    int fd = fds_open("/proc/sys/kernel/perf_event_paranoid", O_RDONLY);
    if (fd < 0)
        return -100;
    ssize_t n = real_read(fd, buf, sizeof buf - 1);
    fds_close(fd);
    if (n <= 0)
        return -100;
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    long v;
    return config_parse_long(buf, -100, 100, &v) == 0 ? (int)v : -100;
}

void cpu_sampler_choose(void)
{
    live = 0;
    perf_threads = timer_threads = 0;
    memset(cpu_perf_fds, 0, sizeof cpu_perf_fds);
    cpu_sampler = CPU_SAMPLER_TIMER;
    if (opt_cpu_sampler == CPU_SAMPLER_TIMER) {
        snprintf(why, sizeof why, "timer (PPROF_CPU_SAMPLER=timer)");
        return;
    }
    if (agent_sandboxed) {
        snprintf(why, sizeof why,
                 "timer (the program installed a system-call filter: no "
                 "perf_event_open)");
        return;
    }
    if (cpu_period_ns < CPU_PERF_MIN_PERIOD_NS) {
        snprintf(why, sizeof why,
                 "timer (above %d Hz: a perf event's overflow is handled "
                 "too close to the next one)",
                 (int)(1000000000 / CPU_PERF_MIN_PERIOD_NS));
        return;
    }
    if (cpu_signo != SIGPROF) {
        snprintf(why, sizeof why,
                 "timer (the program handles SIGPROF: real-time signal %d, "
                 "which a perf event's overflow cannot use safely)",
                 cpu_signo);
        return;
    }
    int err = probe(0);
    cpu_perf_user_only = 0;
    if (err == -EACCES || err == -EPERM) {
        if (probe(1) == 0) {
            err = 0;
            cpu_perf_user_only = 1;
        }
    }
    if (err) {
        snprintf(why, sizeof why,
                 "timer (perf_event_open refused: %s, perf_event_paranoid "
                 "%d)",
                 strerror(-err), paranoid());
        return;
    }
    cpu_sampler = CPU_SAMPLER_PERF;
    if (cpu_perf_user_only)
        snprintf(why, sizeof why,
                 "perf task-clock, user time (perf_event_paranoid %d: "
                 "kernel time weighed into the next sample)",
                 paranoid());
    else
        snprintf(why, sizeof why, "perf task-clock");
}

const char *cpu_sampler_why(void)
{
    return why;
}

void cpu_sampler_counts(int *perf, int *timer)
{
    *perf = __atomic_load_n(&perf_threads, __ATOMIC_RELAXED);
    *timer = __atomic_load_n(&timer_threads, __ATOMIC_RELAXED);
}

void cpu_sampler_count_timer(void)
{
    __atomic_fetch_add(&timer_threads, 1, __ATOMIC_RELAXED);
}

static void bit_set(int fd)
{
    if ((unsigned)fd < CPU_PERF_FDS)
        __atomic_fetch_or(&cpu_perf_fds[fd / 64], 1ULL << (fd % 64),
                          __ATOMIC_RELEASE);
}

static void bit_clear(int fd)
{
    if ((unsigned)fd < CPU_PERF_FDS)
        __atomic_fetch_and(&cpu_perf_fds[fd / 64], ~(1ULL << (fd % 64)),
                           __ATOMIC_RELEASE);
}

int cpu_perf_open(int tid, int *holder)
{
    *holder = -1;
    if (cpu_sampler != CPU_SAMPLER_PERF || agent_sandboxed)
        return -ENOTSUP;
    if (__atomic_add_fetch(&live, 1, __ATOMIC_RELAXED) > CPU_PERF_MAX) {
        __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
        return -EMFILE;
    }
    fds_begin();
    int fd = open_raw(tid, cpu_perf_user_only);
    if (fd >= 0)
        fd = fds_adopt(fd, FDS_HELD, holder);
    fds_end();
    if (fd < 0) {
        __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
        return fd;
    }
    int err = 0;
    struct f_owner_ex owner = {F_OWNER_TID, tid};
    if (fd < fds_floor())
        err = -EMFILE; /* no high number free: not in the host's way */
    else if (fcntl(fd, F_SETOWN_EX, &owner) != 0 ||
             fcntl(fd, F_SETSIG, cpu_signo) != 0 ||
             fcntl(fd, F_SETFL, O_ASYNC) != 0)
        err = -errno;
    if (!err) {
        bit_set(fd);
        if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0)
            err = -errno;
    }
    if (err) {
        cpu_perf_close(holder);
        return err;
    }
    __atomic_fetch_add(&perf_threads, 1, __ATOMIC_RELAXED);
    return fd;
}

void cpu_perf_close(int *holder)
{
    int fd = __atomic_load_n(holder, __ATOMIC_ACQUIRE);
    if (fd < 0)
        return;
    bit_clear(fd);
    fds_close(fd);
    __atomic_store_n(holder, -1, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
}

void cpu_perf_pause(int fd)
{
    ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
}

void cpu_perf_resume(int fd)
{
    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
}

FORK_PATH void cpu_perf_fork_child(int *holder)
{
    /* The parent's event (on a parent's thread): only our copy goes. */
    int fd = *holder;
    if (fd >= 0) {
        bit_clear(fd);
        fds_close(fd);
    }
    *holder = -1;
}
