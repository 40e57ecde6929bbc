/*
 * Taking a threads dump: lists /proc/self/task, decides for each host
 * thread whether it may be interrupted, asks those with a queued real-time
 * signal for their stack (threads_signal.c answers), waits at most
 * THREADS_WAIT_MS, and describes the others from /proc.
 *
 * Runs on an HTTP worker only, one dump at a time (dump_lock). It installs
 * its handler for the length of one dump and puts the host's disposition
 * back afterwards, passing through SIG_IGN so that a signal still pending
 * on a thread that never answered is discarded, never delivered to the
 * host's default action.
 *
 * The signal: a real-time signal the host leaves at its default, chosen
 * from SIGRTMAX down, never the one a running CPU profile uses. Its handler
 * is installed with SA_RESTART and the CPU profiler's signals blocked.
 *
 * Which threads are interrupted (so that the host never sees an EINTR it
 * could not have seen before): a thread that /proc/self/task/TID/syscall
 * shows running, or blocked in read/write-family calls, wait4, waitid,
 * accept, flock, fcntl, open, or an untimed futex wait (pthread mutex,
 * condition variable, join, untimed semaphore): the kernel restarts these
 * after a handler with SA_RESTART. On a socket, the read/write family and
 * accept restart only when the socket has no timeout (SO_RCVTIMEO,
 * SO_SNDTIMEO), which is checked. Every other thread blocked in a system
 * call (poll, select, epoll_wait, nanosleep, timed futex, pause, sigwait
 * ...) is walked from a copy of its stack instead (walk_blocked), as is one
 * that blocks the signal. What a thread is doing is read once more just
 * before its signal is sent; a thread that starts a system call between
 * that read and the signal's arrival (microseconds; longer when this
 * worker is preempted in between) is the one remaining case in which a
 * host could see an EINTR (docs/unwind-tables.md gives the figures).
 *
 * A thread that blocks the signal is never asked (it may read its blocked
 * signals with signalfd or sigwait, and would find ours there), nor one
 * blocked reading a signalfd that includes it (the read would return it,
 * blocked or not). The mask is looked at and the signal sent under
 * sigmask_lock (agent/host/sigmask.c), so the thread cannot block it in
 * between; one that blocks it before the signal is delivered has it
 * dequeued by its mask interposer (agent/host/sigmask_hooks.c).
 */
#include "agent/threads/threads.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/threads/blocked.h"

#include "agent/stacks/cfi.h"
#include "agent/core/clock.h"
#include "agent/host/fds.h"
#include "agent/log.h"
#include "agent/core/own_memory.h"
#include "agent/stacks/phdr_cache.h"
#include "agent/host/proc.h"
#include "agent/cpu/cpu.h"
#include "agent/host/sigmask.h"
#include "agent/host/signals.h"
#include "agent/spinlock.h"
#include "agent/stacks/stack.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
/* Threads between taking dump_lock (or waiting for it) and giving it
 * back: 0 in a fork child means it is free there, known by a read (a
 * trylock writes the lock's page: a fault in every fork). */
static int dump_lock_users FORK_STATE;
int threads_signo;
/* The signal a dump has borrowed and the host's disposition of it, under
 * dump_lock; what a child forked mid-dump must give back. */
static int dump_sig;
static struct sigaction dump_saved;
static uint32_t generation;
static size_t slots_cap;

/* ---- /proc --------------------------------------------------------------- */

/* 1 when fd is a signalfd whose mask includes sig (its fdinfo has a
 * "sigmask:" line; no other descriptor has one). */
static int signalfd_reads(int fd, int sig)
{
    char path[64], buf[512];
    log_snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    if (proc_read(path, buf, sizeof buf) <= 0)
        return 0;
    char *p = strstr(buf, "sigmask:");
    if (!p)
        return 0;
    unsigned long long mask = strtoull(p + 8, NULL, 16);
    return (mask >> (sig - 1)) & 1;
}

/* Fills st from the line read into st->line. Returns 0 or -1 (not a
 * syscall line). */
static int parse_syscall(struct thread_syscall *st)
{
    char *buf = st->line;
    st->nr = -2;
    memset(st->args, 0, sizeof st->args);
    st->sp = st->pc = 0;
    if (strncmp(buf, "running", 7) == 0) {
        st->nr = -1;
        return 0;
    }
    char *p = buf, *end;
    st->nr = strtol(p, &end, 10);
    if (end == p)
        return -1;
    unsigned long v[8];
    int n = 0;
    for (p = end; n < 8; p = end) {
        v[n] = strtoul(p, &end, 0);
        if (end == p)
            break;
        n++;
    }
    if (st->nr >= 0 && n == 8) {
        memcpy(st->args, v, sizeof st->args);
        st->sp = v[6];
        st->pc = v[7];
    } else if (n >= 2) {
        st->pc = v[n - 1];
    }
    return 0;
}

int threads_read_syscall(int tid, struct thread_syscall *st)
{
    return threads_read_syscall_at(NULL, tid, st);
}

int threads_read_syscall_at(const int *tasks_fd, int tid,
                            struct thread_syscall *st)
{
    st->nr = -2;
    ssize_t n =
        proc_task_read(tasks_fd, tid, "syscall", st->line, sizeof st->line);
    if (n <= 0) {
        st->line[0] = '\0';
        return -1;
    }
    return parse_syscall(st);
}

/* 1 when the socket fd has no timeout in the direction used. */
static int socket_untimed(int fd, int optname)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return 0;
    if (!S_ISSOCK(sb.st_mode))
        return 1;
    struct timeval tv;
    socklen_t len = sizeof tv;
    if (getsockopt(fd, SOL_SOCKET, optname, &tv, &len) != 0)
        return 0;
    return tv.tv_sec == 0 && tv.tv_usec == 0;
}

#define FUTEX_CMD_MASK 0x7f /* without FUTEX_PRIVATE_FLAG, CLOCK_REALTIME */

/* 1 when a handler (SA_RESTART) on a thread blocked in st cannot make the
 * call fail with EINTR: the kernel restarts it. Also 0 for a read of a
 * signalfd that would return sig itself. */
static int restarts(const struct thread_syscall *st, int sig)
{
    int fd = (int)st->args[0];
    switch (st->nr) {
    case -1: /* running */
        return 1;
    case SYS_futex: {
        /* Untimed waits restart (-ERESTARTSYS); timed ones return EINTR
         * (sem_timedwait passes it to the host). Lock-PI ops restart. */
        int cmd = (int)st->args[1] & FUTEX_CMD_MASK;
        if (cmd == 6 /* LOCK_PI */ || cmd == 13 /* LOCK_PI2 */)
            return 1;
        return st->args[3] == 0;
    }
    case SYS_read: case SYS_readv: case SYS_pread64: case SYS_preadv:
        if (signalfd_reads(fd, sig))
            return 0;
        return socket_untimed(fd, SO_RCVTIMEO);
    case SYS_recvfrom: case SYS_recvmsg: case SYS_accept: case SYS_accept4:
        return socket_untimed(fd, SO_RCVTIMEO);
    case SYS_write: case SYS_writev: case SYS_pwrite64: case SYS_pwritev:
    case SYS_sendto: case SYS_sendmsg:
        return socket_untimed(fd, SO_SNDTIMEO);
    case SYS_wait4: case SYS_waitid: case SYS_flock: case SYS_fcntl:
    case SYS_open: case SYS_openat:
        return 1;
    default:
        return 0;
    }
}

const char *threads_state_name(char state)
{
    switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk sleep";
    case 'T': return "stopped";
    case 't': return "tracing stop";
    case 'Z': return "zombie";
    case 'X': return "dead";
    case 'I': return "idle";
    case 'P': return "parked";
    default: return "unknown";
    }
}

const char *threads_syscall_name(long nr)
{
    switch (nr) {
    case SYS_read: return "read";
    case SYS_write: return "write";
    case SYS_readv: return "readv";
    case SYS_writev: return "writev";
    case SYS_pread64: return "pread64";
    case SYS_pwrite64: return "pwrite64";
    case SYS_poll: return "poll";
    case SYS_ppoll: return "ppoll";
    case SYS_select: return "select";
    case SYS_pselect6: return "pselect6";
    case SYS_epoll_wait: return "epoll_wait";
    case SYS_epoll_pwait: return "epoll_pwait";
    case SYS_nanosleep: return "nanosleep";
    case SYS_clock_nanosleep: return "clock_nanosleep";
    case SYS_futex: return "futex";
    case SYS_accept: return "accept";
    case SYS_accept4: return "accept4";
    case SYS_connect: return "connect";
    case SYS_recvfrom: return "recvfrom";
    case SYS_recvmsg: return "recvmsg";
    case SYS_sendto: return "sendto";
    case SYS_sendmsg: return "sendmsg";
    case SYS_wait4: return "wait4";
    case SYS_waitid: return "waitid";
    case SYS_pause: return "pause";
    case SYS_rt_sigsuspend: return "rt_sigsuspend";
    case SYS_rt_sigtimedwait: return "rt_sigtimedwait";
    case SYS_flock: return "flock";
    case SYS_fcntl: return "fcntl";
    case SYS_open: return "open";
    case SYS_openat: return "openat";
    case SYS_ioctl: return "ioctl";
    case SYS_msgrcv: return "msgrcv";
    case SYS_semop: return "semop";
    case SYS_semtimedop: return "semtimedop";
    case SYS_io_getevents: return "io_getevents";
    default: return NULL;
    }
}

/* ---- listing ------------------------------------------------------------- */

struct tid_list {
    int *tids;
    size_t n, cap, agent;
};

static int add_tid(void *arg, int tid, int dir_fd)
{
    (void)dir_fd;
    struct tid_list *l = arg;
    if (cpu_is_agent_tid(tid)) {
        l->agent++;
        return 0;
    }
    if (l->n == l->cap) {
        int *more = real_realloc(l->tids, l->cap * 2 * sizeof *l->tids);
        if (!more)
            return -ENOMEM;
        l->tids = more;
        l->cap *= 2;
    }
    l->tids[l->n++] = tid;
    return 0;
}

int *threads_list_tids(size_t *n, size_t *agent)
{
    struct tid_list l = {.cap = 64};
    l.tids = real_malloc(l.cap * sizeof *l.tids);
    if (l.tids && proc_list("/proc/self/task", add_tid, &l) != 0) {
        real_free(l.tids);
        l.tids = NULL;
    }
    *n = l.tids ? l.n : 0;
    *agent = l.agent;
    return l.tids;
}

static int by_tid(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

long threads_host_count(void)
{
    size_t n, agent;
    int *tids = threads_list_tids(&n, &agent);
    real_free(tids);
    return (long)n;
}

/* ---- signal -------------------------------------------------------------- */

/* A real-time signal left at its default by the host, else one whose
 * handler it can chain in front of (signals.h), never one the agent holds
 * (the CPU profile's); installs the handler. Returns the signal or
 * -EAGAIN. */
static int install(struct sigaction *saved)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGPROF);
    sigaddset(&mask, cpu_signo);
    return signals_borrow(SIGRTMAX, SIGRTMIN + 4, 0, threads_signal_handler,
                          &mask, saved, NULL);
}

static void uninstall(int sig, const struct sigaction *saved)
{
    signals_give_back(sig, threads_signal_handler, saved);
}

static int ask(int tid, int sig, uint32_t gen, uint32_t slot)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = sig;
    si.si_code = SI_QUEUE;
    si.si_pid = getpid();
    si.si_uid = getuid();
    si.si_value.sival_ptr = (void *)(uintptr_t)threads_value(gen, slot);
    if (real_syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, sig, &si) != 0)
        return -errno;
    return 0;
}

/* Slots for n threads, mapped once and grown by remapping; an old array
 * is never unmapped (a late handler may still look at it). */
static int ensure_slots(size_t n)
{
    if (threads_slots && n <= slots_cap)
        return 0;
    size_t cap = slots_cap ? slots_cap : 1024;
    while (cap < n)
        cap *= 2;
    void *p = mmap(NULL, cap * sizeof(struct thread_slot),
                   PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    own_memory_add(p, cap * sizeof(struct thread_slot));
    __atomic_store_n(&threads_nslots, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&threads_slots, (struct thread_slot *)p,
                     __ATOMIC_SEQ_CST);
    __atomic_store_n(&threads_nslots, (uint32_t)cap, __ATOMIC_SEQ_CST);
    slots_cap = cap;
    return 0;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- blocked threads: walked from a copy of their stack ------------------ */

/*
 * A thread blocked in a system call does not move: /proc gives the stack
 * pointer and program counter it entered the call with, and its stack
 * above that pointer stays as it is until the call returns. The worker
 * copies up to THREADS_COPY_MAX bytes from there with process_vm_readv on
 * its own process (page by page, so the copy ends at the first unmapped
 * page instead of faulting: the thread may return and exit meanwhile)
 * and walks the copy (cfi_walk_copy), then reads /proc again: a different
 * line means the thread moved while it was copied, and the copy is taken
 * once more, then given up on (THREAD_STACK_MOVED). No signal is sent.
 */
#define PAGE 4096

/* Copies [sp, sp + THREADS_COPY_MAX) up to the first unreadable page into
 * copy. Returns the number of bytes copied. */
static size_t copy_stack(uintptr_t sp, void *copy)
{
    struct iovec local = {copy, THREADS_COPY_MAX};
    struct iovec remote[THREADS_COPY_MAX / PAGE + 1];
    int n = 0;
    for (uintptr_t a = sp, end = sp + THREADS_COPY_MAX; a < end; n++) {
        uintptr_t next = (a & ~(uintptr_t)(PAGE - 1)) + PAGE;
        if (next > end)
            next = end;
        remote[n].iov_base = (void *)a;
        remote[n].iov_len = next - a;
        a = next;
    }
    ssize_t got = process_vm_readv(getpid(), &local, 1, remote,
                                   (unsigned long)n, 0);
    return got > 0 ? (size_t)got : 0;
}

int64_t threads_cpu_ns(int tid)
{
    struct timespec ts;
    if (clock_gettime(thread_cpu_clock(tid), &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int threads_walk_blocked(const int *tasks_fd, int tid,
                         struct thread_syscall *st, int64_t cpu_before,
                         void *copy, uintptr_t *pcs, int max, int *depth)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        size_t got = copy_stack(st->sp, copy);
        struct thread_syscall after;
        /* Not on a CPU since before st was read: its stack is as st found
         * it, and the copy is of that (no second read of /proc). */
        if (attempt == 0 && cpu_before >= 0 &&
            threads_cpu_ns(tid) == cpu_before)
            after = *st;
        else if (threads_read_syscall_at(tasks_fd, tid, &after) != 0)
            break; /* it ended */
        if (strcmp(after.line, st->line) != 0) {
            *st = after;
            if (st->nr < 0 || !st->sp || !st->pc)
                break;
            continue;
        }
        if (got < sizeof(uintptr_t))
            return THREAD_STACK_UNREADABLE;
        struct cfi_regs regs = {st->pc, st->sp, 0, NULL};
        int full;
        int n = cfi_walk_copy(&regs, st->sp, st->sp + got, copy, pcs, max,
                              &full);
        /* Callers are return addresses: turned into their call sites, as
         * in every other stack. The agent's frames between host frames
         * are left out, as for the threads that answer a signal. */
        int kept = 0;
        for (int f = 0; f < n; f++) {
            uintptr_t pc = pcs[f];
            if (f > 0 && pc >= stack_self_start && pc < stack_self_end)
                continue;
            pcs[kept++] = f > 0 ? pc - 1 : pc;
        }
        if (full && kept > 0)
            pcs[kept - 1] = FRAME_TRUNCATED;
        *depth = kept ? kept : 1;
        return THREAD_STACK_OK;
    }
    return THREAD_STACK_MOVED;
}

/* The hooks' frames and the leaf: the real function, then the caller's
 * call sites, the agent's frames left out (the hook itself, a slow path). */
int threads_walk_noted(const struct blocked_note *n, int tid,
                       int64_t cpu_before, void *copy, uintptr_t *pcs,
                       int max, int *depth)
{
    if (cpu_before < 0)
        cpu_before = threads_cpu_ns(tid);
    size_t got = copy_stack(n->cfa, copy);
    if (blocked_note_seq(tid) != n->seq ||
        threads_cpu_ns(tid) != cpu_before)
        return THREAD_STACK_MOVED;
    if (got < sizeof(uintptr_t) || max < 2)
        return THREAD_STACK_UNREADABLE;
    struct cfi_regs regs = {n->ret, n->cfa, n->fp, NULL};
    int full;
    int m = cfi_walk_copy_sites(&regs, n->cfa, n->cfa + got, copy, pcs + 1,
                                max - 1, &full);
    /* The leaf: the real function called (none before it was found). */
    pcs[0] = n->fn;
    int kept = n->fn ? 1 : 0;
    for (int f = 1; f <= m; f++)
        if (pcs[f] < stack_self_start || pcs[f] >= stack_self_end)
            pcs[kept++] = pcs[f];
    if (full && kept > 1)
        pcs[kept - 1] = FRAME_TRUNCATED;
    *depth = kept;
    return THREAD_STACK_OK;
}

static void *stack_copy;

/* Walks of one blocked thread in a dump before it is given up on as
 * moving (each walk copies its stack up to twice). An event loop between
 * short waits moves often; a dump is asked for rarely and worth a few
 * more copies (the wall profile's looks, many a second, try once). */
#define WALK_TRIES 16
/* Beyond those, on a busy machine: the worker copying is descheduled in
 * the middle of a copy often enough that an event loop waking every 250
 * us moved under 16 copies in a row (1 dump in 20 at load 15). Such a
 * thread is tried again after a pause that puts the copy at another
 * moment of its cycle, until the dump has spent WALK_PATIENCE_MS on these
 * extra tries in all (a process of many busy loops is not held up long). */
#define WALK_PATIENCE_MS 100

/* 1 while the dump may still spend time on extra tries. */
static int patience_left(struct thread_dump *d)
{
    int64_t now = agent_now_ns();
    if (!d->patience_end_ns)
        d->patience_end_ns = now + WALK_PATIENCE_MS * 1000000LL;
    return now < d->patience_end_ns;
}

/* The worker's copy of a stack, mapped once; 0 or -1. */
static int need_copy(void)
{
    if (!stack_copy) {
        void *p = mmap(NULL, THREADS_COPY_MAX, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -1;
        stack_copy = p;
    }
    return 0;
}

/* A blocked thread of a process that is not dumpable: walked from where
 * its hook noted it entered its call (agent/threads/blocked.h), or without a stack
 * when it waits in a call no hook notes. */
static void walk_noted(struct thread_dump *d, struct thread_info *t)
{
    if (need_copy() != 0) {
        t->status = THREAD_STACK_UNREADABLE;
        return;
    }
    t->status = THREAD_STACK_NOT_NOTED;
    for (int i = 0; i < WALK_TRIES; i++) {
        int64_t cpu = threads_cpu_ns(t->tid);
        struct blocked_note n;
        if (!blocked_note_read(t->tid, &n)) {
            t->status = THREAD_STACK_NOT_NOTED;
            break;
        }
        t->syscall = n.nr;
        t->status = threads_walk_noted(&n, t->tid, cpu, stack_copy, t->pcs,
                                       THREADS_STACK_MAX, &t->depth);
        if (t->status != THREAD_STACK_MOVED)
            break;
        sched_yield();
    }
    if (t->status == THREAD_STACK_OK)
        d->noted++;
    else if (t->status == THREAD_STACK_NOT_NOTED)
        d->not_noted++;
}

static void walk_blocked(struct thread_dump *d, struct thread_info *t,
                         struct thread_syscall *st)
{
    if (need_copy() != 0) {
        t->status = THREAD_STACK_UNREADABLE;
        return;
    }
    uint64_t found = cfi_walk_counters.fp_found;
    uint64_t lost = cfi_walk_counters.fp_lost;
    for (int i = 0;; i++) {
        int64_t cpu = -1;
        if (i > 0) {
            if (i >= WALK_TRIES) {
                if (!patience_left(d))
                    break;
                struct timespec pause = {0, 100000};
                real_nanosleep(&pause, NULL);
            }
            /* From where it is now; between two calls it runs, and is
             * left a moment to reach the next one. Its CPU clock first:
             * unchanged after the copy, the copy is of a thread that did
             * not run meanwhile (no second read of /proc). */
            cpu = threads_cpu_ns(t->tid);
            if (threads_read_syscall(t->tid, st) != 0)
                break;
            if (st->nr < 0 || !st->sp || !st->pc) {
                sched_yield();
                continue;
            }
        }
        t->status = threads_walk_blocked(NULL, t->tid, st, cpu, stack_copy,
                                         t->pcs, THREADS_STACK_MAX,
                                         &t->depth);
        if (t->status != THREAD_STACK_MOVED)
            break;
    }
    if (t->status == THREAD_STACK_OK)
        d->walked++;
    d->fp_found += cfi_walk_counters.fp_found - found;
    d->fp_lost += cfi_walk_counters.fp_lost - lost;
}

/* ---- the dump ------------------------------------------------------------ */

/* Fills what /proc says and decides whether to ask. Returns 1 to ask. */
static int describe(struct thread_dump *d, struct thread_info *t, int sig)
{
    t->state = proc_thread_state(t->tid, t->name, sizeof t->name);
    t->syscall = -1;
    struct thread_syscall st;
    int have = threads_read_syscall(t->tid, &st) == 0;
    if (have && st.nr >= 0)
        t->syscall = st.nr;
    if (have && st.pc && st.nr != -1) {
        t->pcs[0] = st.pc;
        t->depth = 1;
    }
    if (t->state == 'T' || t->state == 't' || t->state == 'Z' ||
        t->state == 'X') {
        t->status = THREAD_STACK_STOPPED;
        return 0;
    }
    if (!have) {
        /* Not dumpable (it changed its user): its syscall file is root's.
         * Asleep: where its hook noted it (no signal). Running or
         * runnable (stat is everyone's): asked, as a thread the syscall
         * file says runs, its letter read once more just before. */
        d->undumpable = 1;
        blocked_notes_switch_on();
        if (t->state != 'R') {
            walk_noted(d, t);
            return 0;
        }
        have = 1;
        st.nr = -1;
    }
    /* Blocked in a system call that a handler would cut short, or that
     * cannot be asked: walked where it stands, never signalled. */
    int blocked = have && st.nr >= 0 && st.sp && st.pc;
    /* (restarts() first: a call that a handler would cut short is walked
     * whatever the mask, and the mask's /proc read is the dearer look.) */
    if (blocked && (sig <= 0 || !restarts(&st, sig) ||
                    sigmask_thread_blocks(t->tid, sig) == 1)) {
        walk_blocked(d, t, &st);
        return 0;
    }
    if (sig <= 0) {
        t->status = THREAD_STACK_NO_SIGNAL;
        return 0;
    }
    if (sigmask_thread_blocks(t->tid, sig) == 1) {
        t->status = THREAD_STACK_BLOCKED;
        return 0;
    }
    if (!restarts(&st, sig)) {
        t->status = THREAD_STACK_EINTR;
        return 0;
    }
    return 1;
}

/* The threads of the process, sorted by id, into out (statuses zero). */
static int list_threads(struct thread_dump *out)
{
    size_t n;
    int *tids = threads_list_tids(&n, &out->agent_threads);
    if (!tids)
        return -ENOMEM;
    qsort(tids, n, sizeof *tids, by_tid);
    struct thread_info *th = real_calloc(n ? n : 1, sizeof *th);
    if (!th) {
        real_free(tids);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        th[i].tid = tids[i];
    real_free(tids);
    out->threads = th;
    out->n = n;
    return 0;
}

/* Installs the question's handler for n threads (dump_lock held); returns
 * its signal, or <= 0 when there is none (every thread is then walked or
 * left without a stack). */
static int begin_questions(struct thread_dump *out, size_t n)
{
    /* Libraries loaded since the last look must be in the snapshot the
     * handlers unwind with. */
    phdr_cache_refresh(0);
    cfi_tables_refresh();
    stack_go_find(); /* goroutine stacks walked too, in a Go program */
    int sig = ensure_slots(n) == 0 ? install(&dump_saved) : -ENOMEM;
    dump_sig = sig;
    out->signo = sig > 0 ? sig : 0;
    if (sig > 0) {
        /* From here on the host's mask changes wait for our looks. */
        sigmask_watch_begin();
        spin_lock(&sigmask_lock);
        threads_signo = sig;
        spin_unlock(&sigmask_lock);
    }
    return sig;
}

static void end_questions(int sig)
{
    if (sig > 0) {
        uninstall(sig, &dump_saved);
        spin_lock(&sigmask_lock);
        threads_signo = 0;
        spin_unlock(&sigmask_lock);
        sigmask_watch_end();
    }
    dump_sig = 0;
}

/* Looks at thread i: described from /proc, then asked for its stack by
 * signal (1: asked, status THREAD_STACK_NO_ANSWER), or walked where it
 * waits, or given the status that says why it has no stack (0). */
static int ask_thread(struct thread_dump *out, size_t i, int sig,
                      uint32_t gen, struct thread_slot *slots)
{
    struct thread_info *t = &out->threads[i];
    if (!describe(out, t, sig))
        return 0;
    /* The mask once more, and the question, with the thread's own mask
     * changes held off. */
    spin_lock(&sigmask_lock);
    int blocked = sigmask_thread_blocks(t->tid, sig) == 1;
    int err = 0;
    /* And what it is doing, once more, just before the signal: a
     * thread seen running that has entered a call the signal would
     * cut short since is walked instead. This leaves a window of one
     * read of /proc (microseconds), not of the whole look. */
    struct thread_syscall st;
    int readable = !blocked && threads_read_syscall(t->tid, &st) == 0;
    int moved = readable && st.nr >= 0 && st.sp && st.pc &&
                !restarts(&st, sig);
    /* Not dumpable: its state letter instead; asleep now, not asked. */
    int asleep = !blocked && !readable &&
                 proc_thread_state(t->tid, NULL, 0) != 'R';
    if (!blocked && !moved && !asleep) {
        __atomic_store_n(&slots[i].word, ((uint64_t)gen << 2) | SLOT_ASKED,
                         __ATOMIC_SEQ_CST);
        err = ask(t->tid, sig, gen, (uint32_t)i);
    }
    spin_unlock(&sigmask_lock);
    if (blocked) {
        t->status = THREAD_STACK_BLOCKED;
        return 0;
    }
    if (asleep) {
        t->state = proc_thread_state(t->tid, NULL, 0);
        walk_noted(out, t);
        return 0;
    }
    if (moved) {
        t->syscall = st.nr;
        t->state = proc_thread_state(t->tid, NULL, 0);
        walk_blocked(out, t, &st);
        return 0;
    }
    if (err) {
        __atomic_store_n(&slots[i].word, 0, __ATOMIC_RELAXED);
        /* ESRCH: it ended since the listing */
        t->status = err == -ESRCH ? -1 : THREAD_STACK_NO_SIGNAL;
        return 0;
    }
    t->status = THREAD_STACK_NO_ANSWER;
    return 1;
}

/* Waits until the asked threads have answered, or THREADS_WAIT_MS. */
static void wait_answers(const struct thread_dump *out, size_t asked,
                         uint32_t gen, struct thread_slot *slots)
{
    int64_t deadline = mono_ms() + THREADS_WAIT_MS;
    for (;;) {
        size_t done = 0;
        for (size_t i = 0; i < out->n; i++)
            if (out->threads[i].status == THREAD_STACK_NO_ANSWER &&
                __atomic_load_n(&slots[i].word, __ATOMIC_ACQUIRE) ==
                    (((uint64_t)gen << 2) | SLOT_DONE))
                done++;
        if (done == asked || mono_ms() >= deadline)
            break;
        struct timespec nap = {0, 200000};
        real_nanosleep(&nap, NULL);
    }
}

/* Thread t's answer from its slot, or the question withdrawn when it never
 * answered. A handler caught half-way (its thread stopped inside it) gets
 * a little longer; returns 1 when it still has not finished (the slots
 * must then be abandoned for fresh ones). */
static int collect_answer(struct thread_info *t, struct thread_slot *slot,
                          uint32_t gen)
{
    uint64_t asked_word = ((uint64_t)gen << 2) | SLOT_ASKED;
    if (__atomic_compare_exchange_n(&slot->word, &asked_word,
                                    (uint64_t)gen << 2, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return 0; /* never answered */
    int64_t until = mono_ms() + 100;
    while (__atomic_load_n(&slot->word, __ATOMIC_ACQUIRE) !=
               (((uint64_t)gen << 2) | SLOT_DONE) &&
           mono_ms() < until)
        sched_yield();
    if (__atomic_load_n(&slot->word, __ATOMIC_ACQUIRE) !=
        (((uint64_t)gen << 2) | SLOT_DONE))
        return 1;
    uint32_t depth = slot->depth;
    if (depth > THREADS_STACK_MAX)
        depth = THREADS_STACK_MAX;
    /* The agent's frames between host frames (the thread start
     * wrapper, an interposer) are left out, as in every profile; a
     * leaf inside the agent stays. */
    int kept = 0;
    for (uint32_t f = 0; f < depth; f++) {
        uintptr_t pc = slot->pcs[f];
        if (f > 0 && pc >= stack_self_start && pc < stack_self_end)
            continue;
        t->pcs[kept++] = pc;
    }
    t->depth = kept;
    t->labels = slot->labels;
    t->status = THREAD_STACK_OK;
    return 0;
}

int threads_dump(struct thread_dump *out)
{
    memset(out, 0, sizeof *out);
    out->time_ns = agent_now_ns();
    /* Not dumpable: the hooks note where threads block from now on. */
    blocked_notes_check();
    if (list_threads(out) != 0)
        return -ENOMEM;
    size_t n = out->n;
    struct thread_info *th = out->threads;

    __atomic_add_fetch(&dump_lock_users, 1, __ATOMIC_SEQ_CST);
    real_pthread_mutex_lock(&dump_lock);
    int sig = begin_questions(out, n);
    uint32_t gen = ++generation & 0xffff;
    struct thread_slot *slots = threads_slots;
    size_t asked = 0;
    for (size_t i = 0; i < n; i++)
        asked += (size_t)ask_thread(out, i, sig, gen, slots);
    wait_answers(out, asked, gen, slots);
    end_questions(sig);

    /* Collect; withdraw the questions nobody answered. */
    int poisoned = 0;
    for (size_t i = 0; i < n; i++)
        if (th[i].status == THREAD_STACK_NO_ANSWER)
            poisoned |= collect_answer(&th[i], &slots[i], gen);
    if (poisoned) {
        __atomic_store_n(&threads_slots, NULL, __ATOMIC_SEQ_CST);
        slots_cap = 0;
    }
    real_pthread_mutex_unlock(&dump_lock);
    __atomic_sub_fetch(&dump_lock_users, 1, __ATOMIC_SEQ_CST);

    /* Threads that ended since the listing are not part of "now". */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (th[i].status != -1)
            th[kept++] = th[i];
    out->n = kept;
    return 0;
}

FORK_PATH void threads_fork_child(void)
{
    if (__atomic_load_n(&dump_lock_users, __ATOMIC_SEQ_CST) == 0)
        return;
    dump_lock_users = 0;
    /* A worker of the parent was dumping: its lock and borrowed signal
     * came along without it. */
    if (dump_sig > 0)
        uninstall(dump_sig, &dump_saved);
    dump_sig = 0;
    threads_signo = 0; /* sigmask_fork_child() forgot the watch */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&dump_lock, &fresh, sizeof dump_lock);
}

void threads_dump_free(struct thread_dump *d)
{
    real_free(d->threads);
    d->threads = NULL;
    d->n = 0;
}
