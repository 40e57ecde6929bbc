/*
 * The way back from a call made by a stopped thread: a signal frame that
 * puts the thread's own registers back (x86_64).
 *
 * A call returns into the C library's signal trampoline (`__restore_rt`,
 * whose code is `mov $15, %rax; syscall`: rt_sigreturn), with the
 * stack pointer at a frame built here as the kernel builds one for a
 * signal handler: the thread's general registers as the stop found them,
 * its extended state (the NT_X86_XSTATE buffer, in the standard XSAVE
 * layout a signal frame's state has, with the software bytes and the
 * closing magic that mark it complete), its signal mask. rt_sigreturn loads them: the thread is back where
 * it was. That return is taken only if pprof-attach's helper was killed
 * during the call: alive, it stops the thread at the rt_sigreturn's entry
 * and skips it (remote_call.c), so that a restartable sleep keeps its
 * restart block, which rt_sigreturn would have dropped (a `nanosleep`
 * the stop interrupted then returns EINTR, the one trace a killed helper
 * can leave). A system call the stop interrupted is restarted as the
 * kernel would have (the instruction pointer back on the `syscall`, its
 * number, or restart_syscall's, in rax), by the frame and by
 * sigframe_restart alike, since nothing else restarts it there.
 * The alternate signal stack is left as it is: the frame's stack flags
 * are a mode rt_sigreturn refuses, and it then ignores them.
 */
#include "attach/attach.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/user.h>

/* The kernel's struct ucontext for x86_64, as rt_sigreturn reads it. */
struct frame_uc {
    uint64_t flags, link;
    uint64_t ss_sp;
    int32_t ss_flags, ss_pad;
    uint64_t ss_size;
    uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
    uint64_t di, si, bp, bx, dx, ax, cx, sp, ip, eflags;
    uint16_t cs, gs, fs, ss;
    uint64_t err, trapno, oldmask, cr2, fpstate, reserved[8];
    uint64_t sigmask;
};
_Static_assert(sizeof(struct frame_uc) == SIGFRAME_UC_SIZE, "struct ucontext");

#define UC_FP_XSTATE 0x1
#define UC_SIGCONTEXT_SS 0x2
#define UC_STRICT_RESTORE_SS 0x4
#define FP_XSTATE_MAGIC1 0x46505853U
#define FP_XSTATE_MAGIC2 0x46505845U
#define SS_MODE_REFUSED 3 /* neither 0, SS_ONSTACK nor SS_DISABLE */

uintptr_t sigframe_restorer(pid_t pid)
{
    static const unsigned char code[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00,
                                         0x00, 0x0f, 0x05};
    struct mapping libc;
    if (target_find_mapping(pid, "libc.so", 0, &libc) != 0)
        return 0;
    size_t len = libc.end - libc.start;
    unsigned char *text = malloc(len);
    uintptr_t at = 0;
    if (text && peek(pid, libc.start, text, len) == 0) {
        for (size_t i = 0; i + sizeof code <= len && !at; i++)
            if (text[i] == 0x48 && memcmp(text + i, code, sizeof code) == 0)
                at = libc.start + i;
    }
    free(text);
    return at;
}

int sigframe_usable(const struct remote *r)
{
    /* The legacy area (512 bytes) and the XSAVE header (64) at least. */
    return r->restorer && r->xstate_len >= 576;
}

size_t sigframe_fpstate_size(const struct remote *r)
{
    return r->xstate_len + 4;
}

/* The registers as the thread would have them back from the kernel: a
 * system call the stop interrupted set to start again. */
static void restart_set(const struct user_regs_struct *regs, uint64_t *ip,
                        uint64_t *ax)
{
    long rax = (long)regs->rax, nr = (long)regs->orig_rax;
    *ip = regs->rip;
    *ax = regs->rax;
    if (nr < 0)
        return;
    if (rax == -512 || rax == -513 || rax == -514) { /* -ERESTART{SYS,NOINTR,NOHAND} */
        *ip -= 2;
        *ax = (uint64_t)nr;
    } else if (rax == -516) { /* -ERESTART_RESTARTBLOCK */
        *ip -= 2;
        *ax = SYS_restart_syscall;
    }
}

void sigframe_restart(const struct remote *r, void *regs_out)
{
    struct user_regs_struct regs;
    memcpy(&regs, r->regs, sizeof regs);
    uint64_t ip, ax;
    restart_set(&regs, &ip, &ax);
    regs.rip = ip;
    regs.rax = ax;
    regs.orig_rax = (uint64_t)-1;
    memcpy(regs_out, &regs, sizeof regs);
}

void sigframe_build(const struct remote *r, uintptr_t fp_at, void *uc_out,
                    void *fp_out)
{
    const struct user_regs_struct *g = (const void *)r->regs;
    struct frame_uc uc = {
        .flags = UC_FP_XSTATE | UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS,
        .ss_flags = SS_MODE_REFUSED,
        .r8 = g->r8, .r9 = g->r9, .r10 = g->r10, .r11 = g->r11,
        .r12 = g->r12, .r13 = g->r13, .r14 = g->r14, .r15 = g->r15,
        .di = g->rdi, .si = g->rsi, .bp = g->rbp, .bx = g->rbx,
        .dx = g->rdx, .cx = g->rcx, .sp = g->rsp, .eflags = g->eflags,
        .cs = (uint16_t)g->cs, .ss = (uint16_t)g->ss,
        .fpstate = fp_at, .sigmask = r->sigmask,
    };
    restart_set(g, &uc.ip, &uc.ax);
    memcpy(uc_out, &uc, sizeof uc);
    /* The software bytes of a signal frame's state (struct
     * _fpx_sw_bytes, in the legacy area's reserved tail), which the
     * ptrace buffer leaves as the thread's: every feature the buffer may
     * hold (the kernel keeps those the thread has). */
    struct {
        uint32_t magic1, extended_size;
        uint64_t xfeatures;
        uint32_t xstate_size, padding[7];
    } sw = {FP_XSTATE_MAGIC1, (uint32_t)r->xstate_len + 4, ~0ULL,
            (uint32_t)r->xstate_len, {0}};
    uint32_t magic2 = FP_XSTATE_MAGIC2;
    memcpy(fp_out, r->xstate, r->xstate_len);
    memcpy((char *)fp_out + 464, &sw, sizeof sw);
    memcpy((char *)fp_out + r->xstate_len, &magic2, 4);
}
