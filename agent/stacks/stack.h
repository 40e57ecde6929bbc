/* Stack capture (stacks/stack.c). */

#ifndef PPROF_AGENT_STACK_H
#define PPROF_AGENT_STACK_H

#include <signal.h>
#include <stdint.h>

/* Pseudo frames: stack entries below 4096 are never code addresses. The
 * recorders store them; the symbolizer names them (symbols_pseudo_name). */
#define FRAME_TRUNCATED 1 /* the stack was deeper than the agent keeps */
#define FRAME_LOST 2      /* samples that could not be taken or stored */
#define FRAME_UNKNOWN 3   /* no stack could be captured */
#define FRAME_UNAVAILABLE 4 /* a thread's stack could not be taken */
#define FRAME_NOT_NOTED 5 /* a sleeping thread of a process that is not
                             dumpable, in a call no hook notes */
#define FRAME_UNSAMPLED 6 /* CPU time whose timer expiries no tick noticed */
#define FRAME_PSEUDO_KINDS 7 /* the named ones are below this */
#define FRAME_PSEUDO_MAX 4096

#define STACK_MAX 128

/*
 * Captures the calling thread's stack as location addresses (callers'
 * return addresses minus one), leaf first, leaving out the agent's own
 * frames, with the unwind tables (agent/stacks/cfi.h). When the stack is deeper
 * than max, the last entry is FRAME_TRUNCATED. Returns the number of
 * entries, 0 when the thread's stack bounds are unknown. Call with the
 * guard entered. May first learn the thread's stack bounds (a thread the
 * agent did not see start) and refresh the tables after a walk met code
 * loaded since (the loader lock, mmap, and for the main thread's bounds,
 * malloc): call it where the thread holds none of its allocator's locks,
 * e.g. in a malloc hook after the real call returned.
 * Not async-signal-safe.
 */
int stack_capture(uintptr_t *pcs, int max);

/* stack_capture() from the agent function whose frame record is frame
 * (its __builtin_frame_address(0)), called by the one that asks: the
 * frames between are not walked at all. Not async-signal-safe. */
int stack_capture_from(const void *frame, uintptr_t *pcs, int max);

/*
 * The same stack as stack_capture(), for a thread that may hold one of
 * its allocator's locks (a contended lock can be one inside malloc; a
 * thread can be created, or the API called, from inside one): the walk,
 * which takes no lock, makes no system call and never allocates; but a
 * thread the agent did not see start first learns its stack's bounds from
 * /proc/self/maps (open, read, close: once per thread).
 * Async-signal-safe. Does not allocate.
 */
int stack_capture_no_alloc(uintptr_t *pcs, int max);

/* Learns the calling thread's stack bounds for the walker; may allocate
 * (see stack_capture). Called where each new thread starts.
 * Not async-signal-safe. */
void stack_thread_prepare(void);

/*
 * Unwinds the context a signal interrupted (the handler's ucontext) into at
 * most max location addresses, leaf first: the interrupted instruction
 * itself, then callers' return addresses minus one; the last entry is
 * FRAME_TRUNCATED when the stack was deeper. Returns the number of
 * entries, 0 when the thread's stack bounds are unknown.
 * Async-signal-safe. Does not allocate. Makes no system call.
 */
uint32_t stack_unwind_signal(void *ucontext, uintptr_t *pcs, uint32_t max);
/* The context the agent's signal handler running on this thread
 * interrupted (set and restored by stack_signal_run), so that a signal
 * landing inside that handler is charged to the host
 * (stack_unwind_signal). */
extern __thread const void *stack_signal_outer
    __attribute__((tls_model("initial-exec")));

/* The body of each of the agent's signal handlers: take(sig, si, ucv), the
 * sample itself, with the interrupted context published for a signal of
 * the agent's that lands inside (stack_signal_outer): the outermost
 * handler's is the host's. Inline, so take is called directly.
 * Async-signal-safe. */
static inline void stack_signal_run(void (*take)(int, siginfo_t *, void *),
                                    int sig, siginfo_t *si, void *ucv)
{
    const void *outer = stack_signal_outer;
    if (!outer)
        stack_signal_outer = ucv;
    take(sig, si, ucv);
    stack_signal_outer = outer;
}

/* Records the signal-return trampoline of the handler just installed for
 * sig (its sa_restorer), so that a sample that interrupts one of the
 * agent's own handlers is charged to the host's stack under it
 * (stack_unwind_signal). Call after each sigaction that installs one.
 * Not async-signal-safe. */
void stack_note_handler(int sig);

/* Address range of the agent's own code, to strip its frames. */
extern uintptr_t stack_self_start, stack_self_end;

/*
 * The stacks of threads the agent did not see start, whose bounds the
 * signal handlers cannot learn: the threads of a process the agent was
 * attached to (process/attach.c). stack_foreign_snapshot() keeps the
 * process's writable mappings as /proc/self/maps lists them now; it is
 * called only while no handler of the agent can run (before an attached
 * agent serves). A thread of the C library's keeps its control block at
 * the top of its stack's mapping, above every frame: the handler takes
 * [sp, that block) as the stack when one mapping of the snapshot holds
 * both (stack_signal.c). Not async-signal-safe.
 */
void stack_foreign_snapshot(void);
struct stack_range {
    uintptr_t lo, hi;
};
/* Written by stack_foreign_snapshot (sorted by lo), read by the handlers
 * after it. */
extern struct stack_range stack_foreign[];
extern int stack_foreign_n;
/* 1 when pc lies in the agent's own code. Async-signal-safe. */
static inline int stack_is_self(uintptr_t pc)
{
    return pc >= stack_self_start && pc < stack_self_end;
}
/* The C library's signal-return trampoline (x86-64 glibc's __restore_rt,
 * the sa_restorer of every handler installed through its sigaction); 0
 * until stack_note_handler saw one. */
extern uintptr_t stack_sigreturn_at;
/* In a Go program (cgo, so the agent is loaded): where the running
 * goroutine's g sits, as an offset from the thread pointer; 0 elsewhere,
 * or until stack_go_find() has looked (go_stack.c). */
extern intptr_t stack_go_g_at;
/* Looks for Go's runtime.tlsg in the executable, once a process; call on
 * an agent worker before a profile or a dump sends its first signal. Not
 * async-signal-safe. */
void stack_go_find(void);
/* 1 when the executable carries Go's build ID note (read in memory, no
 * file). Not async-signal-safe. */
int stack_go_program(void);
/* Records the agent's own text range. Not async-signal-safe. */
void stack_init(void);

#endif
