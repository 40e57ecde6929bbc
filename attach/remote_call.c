/*
 * Calls made by a thread of the target, stopped with ptrace (x86_64).
 *
 * PTRACE_SEIZE, then PTRACE_INTERRUPT: the thread stops where it is, in
 * its own code or inside a system call. Its registers and its extended
 * state (the vector registers the call will use) are saved. A call sets
 * the arguments, points the instruction pointer at the function and
 * pushes a return address of 0, below the thread's red zone: returning,
 * the function faults at address 0, which stops the thread again
 * (SIGSEGV, reported to the tracer before any handler of the host sees
 * it; it is then discarded). Nothing of the host's memory is changed: the
 * arguments lie below the stack pointer, where the thread writes only
 * after it moved the pointer past them.
 *
 * A thread stopped inside a blocking system call has been made to return
 * -ERESTARTSYS (or a relative) with orig_rax holding the call's number;
 * the kernel restarts such a call on the way back to user space, looking
 * at those two registers. Each call is made with orig_rax = -1, so that
 * no restart is applied to it; remote_release() puts back the original
 * registers at the last stop, which is inside the kernel's signal
 * delivery: the restart then happens exactly as it would have without us.
 *
 * Signals that arrive while the thread runs a call are delivered to it
 * (the host's handler runs, as it would have in any code). If the tracer
 * ends, the kernel detaches the thread and lets it run on with whatever
 * registers it has: pprof-attach makes these calls from a helper process
 * that outlives pprof-attach itself (pprof-attach.c).
 */
#include "attach/attach.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(struct user_regs_struct) <= sizeof(((struct remote *)0)->regs),
               "register buffer");

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Waits for the next stop of the thread. Returns the status, or -1 when
 * it (or its process) ended. */
static int wait_stop(struct remote *r)
{
    int st;
    for (;;) {
        pid_t w = waitpid(r->tid, &st, __WALL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 || WIFEXITED(st) || WIFSIGNALED(st))
            return -1;
        return st;
    }
}

/* Says that the stopped thread ended (what), and whether its process
 * ended with it or runs on: another thread ran a new program (execve),
 * which ends every other thread, or the thread exited by itself. */
static void say_ended(const struct remote *r, const char *what)
{
    char state[64] = "";
    if ((kill(r->pid, 0) != 0 && errno == ESRCH) ||
        target_status(r->pid, "State", state, sizeof state) != 0 ||
        state[0] == 'Z')
        say("pid %d ended%s", (int)r->pid, what);
    else
        say("thread %d of pid %d ended%s; the process runs on (another of "
            "its threads ran a new program, execve, or the thread exited)",
            (int)r->tid, (int)r->pid, what);
}

/* Stops the seized thread (PTRACE_INTERRUPT), delivering the signals
 * that arrive first, and reads its registers. Returns 0 or -1 (said). */
static int interrupt(struct remote *r)
{
    if (ptrace(PTRACE_INTERRUPT, r->tid, 0, 0) != 0) {
        say("cannot stop thread %d: %s", (int)r->tid, strerror(errno));
        return -1;
    }
    for (;;) {
        int st = wait_stop(r);
        if (st < 0) {
            say_ended(r, "");
            return -1;
        }
        if ((st >> 16) == PTRACE_EVENT_STOP)
            break;
        /* A signal on its way to the thread: delivered, and the
         * interrupt's stop follows. */
        ptrace(PTRACE_CONT, r->tid, 0, (void *)(long)WSTOPSIG(st));
    }
    r->stops++;
    if (ptrace(PTRACE_GETREGS, r->tid, 0, r->regs) != 0) {
        say("cannot read the registers of thread %d: %s", (int)r->tid,
            strerror(errno));
        return -1;
    }
    return 0;
}

/* How many times, at most, the thread is stopped to find it at a safe
 * point; between two stops it runs 0.1 to 2 ms (a phase of its own, so
 * that a loop is not met at the same point each time). */
#define SAFE_TRIES 2000

/* Stops the thread where safe says it may make calls. Returns 0, or -1
 * (said; the thread stopped, or ended). */
static int stop_safe(struct remote *r,
                     int (*safe)(pid_t, const void *, const void *),
                     const void *arg)
{
    for (int i = 0; i < SAFE_TRIES; i++) {
        int64_t at = mono_ns();
        if (interrupt(r) != 0)
            return -1;
        if (!safe || safe(r->pid, r->regs, arg)) {
            r->stop_at_ns = at;
            return 0;
        }
        if (i == SAFE_TRIES - 1 || ptrace(PTRACE_CONT, r->tid, 0, 0) != 0)
            break;
        struct timespec nap = {0, 100000L + (at / 7) % 1900000L};
        nanosleep(&nap, NULL);
    }
    say("thread %d of pid %d was inside its allocator or its loader at "
        "each of %d stops: nothing was called there; try again",
        (int)r->tid, (int)r->pid, r->stops);
    return -1;
}

int remote_stop(struct remote *r, pid_t pid, pid_t tid,
                int (*safe)(pid_t, const void *, const void *),
                const void *arg)
{
    memset(r, 0, sizeof *r);
    r->pid = pid;
    r->tid = tid;
    r->mem = -1;
    r->restorer = sigframe_restorer(pid);
    if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD) != 0) {
        int e = errno;
        if (e == EPERM)
            say("not allowed to trace pid %d (ptrace: %s): it needs the same "
                "user and no Yama restriction "
                "(/proc/sys/kernel/yama/ptrace_scope 0), or CAP_SYS_PTRACE; "
                "or another tracer (a debugger) holds it",
                (int)pid, strerror(e));
        else if (e == ESRCH)
            say("no such process: %d", (int)pid);
        else
            say("cannot trace pid %d: %s", (int)pid, strerror(e));
        return -1;
    }
    if (stop_safe(r, safe, arg) != 0) {
        ptrace(PTRACE_DETACH, tid, 0, 0);
        return -1;
    }
    r->stopped = 1;
    struct iovec iov = {r->xstate, sizeof r->xstate};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) != 0) {
        say("cannot read the registers of thread %d: %s", (int)tid,
            strerror(errno));
        ptrace(PTRACE_DETACH, tid, 0, 0);
        r->stopped = 0;
        return -1;
    }
    r->xstate_len = iov.iov_len;
    char blocked[64];
    if (target_thread_status(pid, tid, "SigBlk", blocked, sizeof blocked) != 0)
        r->restorer = 0; /* the mask unknown: no frame */
    r->sigmask = strtoull(blocked, NULL, 16);
    if (!sigframe_usable(r))
        r->restorer = 0;
    char mem[64];
    snprintf(mem, sizeof mem, "/proc/%d/mem", (int)pid);
    r->mem = open(mem, O_RDWR | O_CLOEXEC);
    if (r->mem < 0) {
        say("cannot open %s: %s", mem, strerror(errno));
        remote_release(r);
        return -1;
    }
    return 0;
}

/* Sets the registers of a call of fn(a0, a1) whose stack pointer is at
 * ret_at (its return address there). 0 or -1 (said). */
static int start_call(struct remote *r, uintptr_t fn, uint64_t a0,
                      uint64_t a1, uint64_t data_at, uint64_t ret_at)
{
    struct user_regs_struct regs;
    memcpy(&regs, r->regs, sizeof regs);
    regs.rdi = a0 == REMOTE_DATA ? data_at : a0;
    regs.rsi = a1 == REMOTE_DATA ? data_at : a1;
    regs.rax = 0;
    regs.rsp = ret_at;
    regs.rip = fn;
    regs.orig_rax = (uint64_t)-1; /* no system call restart for the call */
    regs.eflags &= ~(1ULL << 10);  /* the direction flag clear, per the ABI */
    if (ptrace(PTRACE_SETREGS, r->tid, 0, &regs) != 0) {
        say("cannot start the call on thread %d: %s", (int)r->tid,
            strerror(errno));
        return -1;
    }
    return 0;
}

int remote_call_value(struct remote *r, uintptr_t fn, uint64_t a0,
                      uint64_t a1, const void *data, size_t size,
                      uint64_t *ret)
{
    r->at_frame = 0;
    const struct user_regs_struct *g = (const void *)r->regs;
    /* Below the red zone (128 bytes) and a margin; the data 16-aligned,
     * the return address under it, so that at the function's entry the
     * stack is as after a call (rsp + 8 a multiple of 16). */
    uint64_t data_at = (g->rsp - 256 - size) & ~(uint64_t)15;
    uint64_t ret_at = data_at - 8, zero = 0;
    if ((size && remote_write(r, data_at, data, size)) ||
        remote_write(r, ret_at, &zero, 8) ||
        start_call(r, fn, a0, a1, data_at, ret_at) != 0)
        return -1;
    if (ptrace(PTRACE_CONT, r->tid, 0, 0) != 0) {
        say("cannot start the call on thread %d: %s", (int)r->tid,
            strerror(errno));
        return -1;
    }
    for (;;) {
        int st = wait_stop(r);
        if (st < 0) {
            say_ended(r, " during the call");
            r->stopped = 0;
            return -1;
        }
        int sig = WSTOPSIG(st);
        if ((st >> 16) == PTRACE_EVENT_STOP) {
            /* A group stop (SIGSTOP) asked while the call runs: the call
             * goes on; the stop is the host's to repeat. */
            ptrace(PTRACE_CONT, r->tid, 0, 0);
            continue;
        }
        if (sig == SIGSEGV) {
            struct user_regs_struct now;
            if (ptrace(PTRACE_GETREGS, r->tid, 0, &now) == 0 && now.rip == 0) {
                *ret = now.rax;
                return 0; /* back at the return address: the call returned */
            }
        }
        ptrace(PTRACE_CONT, r->tid, 0, (void *)(long)sig);
    }
}

/* Runs the started call until it returned into the frame at uc_at: the
 * thread stopped at the entry of its rt_sigreturn, which is left to run
 * only if this process dies (remote_release and the next call skip it).
 * Other system calls pass; signals are delivered; a group stop asked
 * meanwhile is the host's to repeat. 0 or -1 (said). */
static int run_to_frame(struct remote *r, uint64_t uc_at)
{
    int sig = 0;
    for (;;) {
        if (ptrace(PTRACE_SYSCALL, r->tid, 0, (void *)(long)sig) != 0) {
            say("cannot run the call on thread %d: %s", (int)r->tid,
                strerror(errno));
            return -1;
        }
        int st = wait_stop(r);
        if (st < 0) {
            say_ended(r, " during the call");
            r->stopped = 0;
            return -1;
        }
        sig = 0;
        if ((st >> 16) == PTRACE_EVENT_STOP)
            continue;
        if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
            sig = WSTOPSIG(st);
            continue;
        }
        struct __ptrace_syscall_info info;
        if (ptrace(PTRACE_GET_SYSCALL_INFO, r->tid, (void *)sizeof info,
                   &info) > 0 &&
            info.op == PTRACE_SYSCALL_INFO_ENTRY &&
            info.entry.nr == SYS_rt_sigreturn && info.stack_pointer == uc_at)
            return 0;
    }
}

int remote_call(struct remote *r, uintptr_t fn, uint64_t a0, uint64_t a1,
                const void *data, size_t size, uint64_t *ret)
{
    if (!r->restorer)
        return remote_call_value(r, fn, a0, a1, data, size, ret);
    const struct user_regs_struct *g = (const void *)r->regs;
    size_t fp_size = sigframe_fpstate_size(r);
    uint64_t data_at = (g->rsp - 256 - size) & ~(uint64_t)15;
    uint64_t fp_at = (data_at - fp_size) & ~(uint64_t)63;
    uint64_t uc_at = (fp_at - SIGFRAME_UC_SIZE - 128) & ~(uint64_t)15;
    unsigned char uc[SIGFRAME_UC_SIZE];
    unsigned char *fp = malloc(fp_size);
    if (!fp)
        return -1;
    sigframe_build(r, fp_at, uc, fp);
    uint64_t back = r->restorer;
    int err = (size && remote_write(r, data_at, data, size)) ||
              remote_write(r, fp_at, fp, fp_size) ||
              remote_write(r, uc_at, uc, sizeof uc) ||
              remote_write(r, uc_at - 8, &back, 8);
    free(fp);
    if (err || start_call(r, fn, a0, a1, data_at, uc_at - 8) != 0)
        return -1;
    r->at_frame = 0;
    if (run_to_frame(r, uc_at) != 0)
        return -1;
    r->at_frame = 1;
    *ret = REMOTE_LOST;
    return 0;
}

int remote_write(struct remote *r, uintptr_t addr, const void *data,
                 size_t size)
{
    if (pwrite(r->mem, data, size, (off_t)addr) == (ssize_t)size)
        return 0;
    say("cannot write to the memory of pid %d: %s", (int)r->pid,
        strerror(errno));
    return -1;
}

int remote_read(struct remote *r, uintptr_t addr, void *buf, size_t size)
{
    ssize_t n = pread(r->mem, buf, size - 1, (off_t)addr);
    if (n <= 0)
        return -1;
    ((char *)buf)[n] = '\0';
    return 0;
}

void remote_release(struct remote *r)
{
    if (r->stopped) {
        struct iovec iov = {r->xstate, r->xstate_len};
        ptrace(PTRACE_SETREGSET, r->tid, (void *)NT_X86_XSTATE, &iov);
        if (r->at_frame) {
            /* At the entry of the frame's rt_sigreturn: skipped, and the
             * thread's own registers with the restart the kernel would
             * have made (sigframe_restart). */
            struct user_regs_struct regs;
            sigframe_restart(r, &regs);
            ptrace(PTRACE_SETREGS, r->tid, 0, &regs);
        } else {
            ptrace(PTRACE_SETREGS, r->tid, 0, r->regs);
        }
        /* Signal 0: the fault at the return address is discarded. */
        ptrace(PTRACE_DETACH, r->tid, 0, 0);
        r->stopped = 0;
        r->stopped_ns = mono_ns() - r->stop_at_ns;
    }
    if (r->mem >= 0)
        close(r->mem);
    r->mem = -1;
}

int peek(pid_t pid, uintptr_t addr, void *buf, size_t size)
{
    struct iovec local = {buf, size}, remote = {(void *)addr, size};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)size
               ? 0
               : -1;
}
