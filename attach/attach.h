/*
 * pprof-attach: loads the agent into a process that is already running,
 * or detaches it (docs/attach.md). A program of its own, beside the
 * library: it includes nothing of agent/, encoder/, http/ or process/, and
 * they know nothing of it but the two exported calls and the state word
 * (process/attach.c).
 *
 * Errors are one line on stderr, "pprof-attach: ...", said where they are
 * found; functions return 0 or -1 after saying it.
 */
#ifndef PPROF_ATTACH_H
#define PPROF_ATTACH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Says one line on stderr, prefixed "pprof-attach: ". */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the target as /proc shows it (target.c) ---------------------------- */

struct mapping {
    uintptr_t start;    /* where the object's code is mapped */
    uintptr_t end;      /* and where that mapping ends */
    uint64_t offset;    /* the file offset mapped there */
    uint64_t inode;
    char path[4096];    /* as the target sees it */
};

/* The first executable mapping whose file's name (after the last '/')
 * starts with prefix, or whose inode is inode when inode is not 0. Returns 0, or -1
 * when there is none (nothing said). */
int target_find_mapping(pid_t pid, const char *prefix, uint64_t inode,
                        struct mapping *out);
/* Calls fn for each mapping of an object's code (a file, executable).
 * Returns 0, or -1 when the maps cannot be read. */
int target_code_mappings(pid_t pid, void (*fn)(const struct mapping *, void *),
                         void *arg);
/* 1 when a mapping's file name contains s. */
int target_maps_contain(pid_t pid, const char *s);
/* A field of /proc/PID/status ("State", "TracerPid", "Seccomp"), its
 * value into out. Returns 0 or -1. */
int target_status(pid_t pid, const char *field, char *out, size_t size);
/* The same of thread tid's /proc/PID/task/TID/status ("SigBlk"). */
int target_thread_status(pid_t pid, pid_t tid, const char *field, char *out,
                         size_t size);
/* The thread to make the calls on: the main thread, or the first other
 * one when it has ended. Returns its id, or -1. */
pid_t target_thread(pid_t pid);
/* path as the target sees it, as this process reaches it
 * (/proc/PID/root/path). */
void target_path(pid_t pid, const char *path, char *out, size_t size);

/* ---- symbols of an ELF file (elf_symbol.c) ------------------------------ */

/* The address of the dynamic symbol name of the file at path (a
 * shared object) loaded where m says (a mapping of its code). Returns 0
 * or -1 (nothing said). */
int elf_symbol_address(const char *path, const struct mapping *m,
                       const char *name, uintptr_t *out);

/* ---- where a stopped thread may make calls (safe_point.c) --------------- */

/* The code a thread must be outside of to be made to call: every object
 * that defines malloc (the C library, an allocator preloaded or linked
 * in) and the loader. */
#define SAFE_RANGES_MAX 64
struct safe_ranges {
    int n;
    uintptr_t start[SAFE_RANGES_MAX], end[SAFE_RANGES_MAX];
};

/* Reads pid's ranges into s. Returns 0, or -1 (said). */
int safe_ranges_read(pid_t pid, struct safe_ranges *s);
/* 1 when the thread whose registers (struct user_regs_struct) regs are,
 * stopped, is at a point where it may call into the C library: outside
 * the ranges, or in a blocking system call none of the allocator's that
 * the stop interrupted. ranges is a struct safe_ranges. */
int safe_point(pid_t pid, const void *regs, const void *ranges);

/* ---- the way back from a call: a signal frame (sigframe.c) -------------- */

struct remote;
#define SIGFRAME_UC_SIZE 304 /* the kernel's struct ucontext */
/* The address of the C library's rt_sigreturn trampoline in pid, or 0. */
uintptr_t sigframe_restorer(pid_t pid);
/* 1 when r's saved extended state can make a frame's. */
int sigframe_usable(const struct remote *r);
/* Bytes of the frame's extended state: r's, and the magic after it. */
size_t sigframe_fpstate_size(const struct remote *r);
/* The frame that puts r's saved registers back: the ucontext into uc_out
 * (SIGFRAME_UC_SIZE bytes), the extended state, to be written at fp_at
 * (64-aligned), into fp_out (sigframe_fpstate_size bytes). */
void sigframe_build(const struct remote *r, uintptr_t fp_at, void *uc_out,
                    void *fp_out);
/* r's saved registers (struct user_regs_struct) into regs_out as the
 * kernel would return them to the thread: a system call the stop
 * interrupted set to start again (the instruction pointer back on its
 * `syscall`, its number, or restart_syscall's, in rax), orig_rax -1. */
void sigframe_restart(const struct remote *r, void *regs_out);

/* ---- calls made by a stopped thread (remote_call.c) --------------------- */

struct remote {
    pid_t pid, tid;
    int mem;            /* /proc/PID/mem, read-write */
    int stopped;        /* 1 between remote_stop and remote_release */
    int64_t stopped_ns; /* how long the thread was stopped, once released */
    /* What the thread was doing, put back by remote_release. */
    unsigned char regs[27 * 8];  /* struct user_regs_struct */
    unsigned char xstate[16384]; /* NT_X86_XSTATE */
    size_t xstate_len;
    int64_t stop_at_ns;
    int stops;          /* the stops it took to find a safe point */
    uintptr_t restorer; /* the C library's rt_sigreturn trampoline, or 0 */
    uint64_t sigmask;   /* the thread's blocked signals at the stop */
    int at_frame;       /* stopped at the entry of the frame's rt_sigreturn */
};

/* Seizes and stops thread tid of pid where safe(pid, regs, arg) says it
 * may make calls (when safe is not NULL; elsewhere it is let run a moment
 * and stopped again), saving its registers. Returns 0 or -1 (said). */
int remote_stop(struct remote *r, pid_t pid, pid_t tid,
                int (*safe)(pid_t, const void *, const void *),
                const void *arg);
/* Makes the stopped thread call fn(a0, a1), with data (size bytes) put on
 * its stack below the red zone; *a0 (or *a1) equal to REMOTE_DATA means
 * the data's address there. Signals that arrive meanwhile are delivered.
 * The call returns into a signal frame that would give the thread its own
 * registers back (sigframe.c) if this process died meanwhile; alive, it
 * stops the thread at the frame's rt_sigreturn, which the next call or
 * remote_release skips. The result is lost on the way: *ret is
 * REMOTE_LOST. Where the
 * frame cannot be made (no trampoline found), it returns to address 0
 * instead, and *ret is the result (rax). Returns 0 or -1 (said; the
 * target ended, or the call crashed). */
#define REMOTE_DATA ((uint64_t)-2)
#define REMOTE_LOST ((uint64_t)-3)
int remote_call(struct remote *r, uintptr_t fn, uint64_t a0, uint64_t a1,
                const void *data, size_t size, uint64_t *ret);
/* The same, always returning to address 0, for a call whose result is
 * needed: the thread then faults there if this process has died. */
int remote_call_value(struct remote *r, uintptr_t fn, uint64_t a0,
                      uint64_t a1, const void *data, size_t size,
                      uint64_t *ret);
/* Writes size bytes of data at addr of the stopped target. 0 or -1. */
int remote_write(struct remote *r, uintptr_t addr, const void *data,
                 size_t size);
/* Reads a string of the target at addr (NUL-terminated, within size). */
int remote_read(struct remote *r, uintptr_t addr, void *buf, size_t size);
/* Puts the registers back and detaches: a system call the stop
 * interrupted restarts as the kernel would have restarted it. */
void remote_release(struct remote *r);

/* Reads size bytes of pid's memory at addr without stopping it. */
int peek(pid_t pid, uintptr_t addr, void *buf, size_t size);

#endif
