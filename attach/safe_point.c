/*
 * Where a stopped thread may be made to call into the C library.
 *
 * The calls of an attach (dlopen, then the agent's start) and of a detach
 * allocate with the process's malloc. A thread stopped inside that
 * allocator may be halfway through changing its state: in a process with
 * several threads it holds an arena's lock, and the call would wait for
 * itself for ever; in a single-threaded one glibc takes no lock at all,
 * and the call works on a half-changed heap (glibc then aborts with
 * "malloc assertion failure in sysmalloc", or blocks are overwritten:
 * 5 of 20 single-threaded targets stopped at random, test
 * attach_malloc.sh). The loader is the same. So the thread may make the
 * calls only where it is known to be outside them:
 *  - its instruction pointer is outside every object that defines
 *    `malloc` (the C library, an allocator preloaded or linked in, the
 *    agent itself once attached) and outside the loader; or
 *  - it is inside one, in a blocking system call the stop interrupted
 *    that is none of the allocator's own (brk, mmap, munmap, mremap,
 *    mprotect, madvise): epoll_wait, read, nanosleep, a futex wait. The
 *    allocator makes no other call while its state is half-changed, and
 *    a thread waiting for an arena's lock holds none.
 * Anywhere else the caller lets the thread run a moment and stops it
 * again (remote_stop). Not told apart: a signal handler that interrupted
 * the allocator on the same thread and runs the host's own code or a
 * system call.
 */
#include "attach/attach.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/user.h>

struct ranges_read {
    pid_t pid;
    struct safe_ranges *s;
    uint64_t inode_yes, inode_no; /* the last file found to be, or not */
};

/* 1 when the object mapped at m is the loader or defines malloc. */
static int unsafe_object(struct ranges_read *rr, const struct mapping *m)
{
    if (m->inode && m->inode == rr->inode_yes)
        return 1;
    if (m->inode && m->inode == rr->inode_no)
        return 0;
    const char *name = strrchr(m->path, '/');
    name = name ? name + 1 : m->path;
    char file[4200];
    uintptr_t at;
    target_path(rr->pid, m->path, file, sizeof file);
    int yes = strncmp(name, "ld-linux", 8) == 0 ||
              elf_symbol_address(file, m, "malloc", &at) == 0;
    *(yes ? &rr->inode_yes : &rr->inode_no) = m->inode;
    return yes;
}

static void add_range(const struct mapping *m, void *arg)
{
    struct ranges_read *rr = arg;
    struct safe_ranges *s = rr->s;
    if (s->n < SAFE_RANGES_MAX && unsafe_object(rr, m)) {
        s->start[s->n] = m->start;
        s->end[s->n] = m->end;
        s->n++;
    }
}

int safe_ranges_read(pid_t pid, struct safe_ranges *s)
{
    struct ranges_read rr = {.pid = pid, .s = s};
    s->n = 0;
    if (target_code_mappings(pid, add_range, &rr) != 0) {
        say("cannot read the mappings of pid %d: %s", (int)pid,
            strerror(errno));
        return -1;
    }
    return 0;
}

static int allocator_call(long nr)
{
    return nr == SYS_brk || nr == SYS_mmap || nr == SYS_munmap ||
           nr == SYS_mremap || nr == SYS_mprotect || nr == SYS_madvise;
}

/* 1 when the stop interrupted a blocking system call (it returns a
 * restart code or EINTR at the instruction after a `syscall`) that is
 * not one of the allocator's. */
static int in_other_call(pid_t pid, const struct user_regs_struct *regs)
{
    long rax = (long)regs->rax, nr = (long)regs->orig_rax;
    unsigned char insn[2];
    if (nr < 0 || allocator_call(nr) ||
        !(rax == -EINTR || (rax <= -512 && rax >= -516)))
        return 0;
    return peek(pid, regs->rip - 2, insn, 2) == 0 && insn[0] == 0x0f &&
           insn[1] == 0x05;
}

int safe_point(pid_t pid, const void *regs_, const void *ranges)
{
    const struct user_regs_struct *regs = regs_;
    const struct safe_ranges *s = ranges;
    for (int i = 0; i < s->n; i++)
        if (regs->rip >= s->start[i] && regs->rip < s->end[i])
            return in_other_call(pid, regs);
    return 1;
}
