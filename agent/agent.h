/*
 * agent/ records: configuration, logging, the reentrancy guard, stack
 * capture, the stack table, the thread registry and the interposers that
 * feed them. This header is the contract between those files and the
 * encoder/ and http/ folders that read the tables.
 *
 * Contexts: interposed calls run on the host's threads (hot paths: never
 * block, never allocate through the hooks, never log in a loop); signal
 * handlers run anywhere (only functions marked Async-signal-safe); the
 * agent's own threads (HTTP workers) keep the reentrancy flag set so every
 * call they make goes straight to the real C library.
 */
#ifndef PPROF_AGENT_H
#define PPROF_AGENT_H

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Marks code that runs in signal context; see the file comments. */
#define PPROF_SIGNAL_SAFE

/* ---- configuration (config.c), read once by the constructor ------------- */

enum log_level { LOG_QUIET = 0, LOG_INFO = 1, LOG_DEBUG = 2 };

extern int opt_enable;           /* PPROF_ENABLE: 0 = pure pass-through */
extern int opt_serve;            /* 0 when PPROF_ADDR=off */
extern char opt_addr[256];       /* PPROF_ADDR as civetweb wants it */
extern char opt_addr_shown[256]; /* PPROF_ADDR as the user wrote it */
extern int opt_addr_loopback;    /* the address is on the loopback */
extern int opt_addr_ipv6;        /* the address is a bracketed IPv6 literal */
extern char opt_port_file[1024]; /* PPROF_PORT_FILE or "" */
extern char opt_token[256];      /* PPROF_TOKEN or "" */
extern int opt_log_level;        /* PPROF_LOG */
extern long opt_heap_rate;       /* PPROF_HEAP_RATE, bytes; 0 = off */
extern int opt_cpu_hz;           /* PPROF_CPU_HZ */
extern int opt_wall_hz;          /* PPROF_WALL_HZ */
extern long opt_wall_cost;       /* PPROF_WALL_COST, thousandths */
extern long opt_mutex_fraction;  /* PPROF_MUTEX_FRACTION; 0 = off */
extern long opt_block_rate;      /* PPROF_BLOCK_RATE, ns; 0 = off */
extern char opt_debug_dir[4096]; /* PPROF_DEBUG_DIR: absolute dirs, ':' */

/* Reads and validates every PPROF_* variable; a bad value is reported in
 * one line and replaced by its default. Not async-signal-safe. */
void config_load(void);

/* Parses a decimal integer in [min, max] from s (whole string).
 * Returns 0 or -EINVAL. Async-signal-safe. Does not allocate. */
int config_parse_long(const char *s, long min, long max, long *out);
/* Copies the n bytes at s (up to a separator found by the caller) into dst
 * as a string, when they fit in size with the NUL. Returns 0 or -EINVAL
 * (dst untouched). Async-signal-safe. Does not allocate. */
int config_copy_prefix(char *dst, size_t size, const char *s, size_t n);

/* ---- logging (log.c) ----------------------------------------------------- */

/* Formats "pprofagent: <message>\n" into a stack buffer and write(2)s it to
 * stderr. Supports %s %c %d %i %u %x %p %% with l, ll, z modifiers. Never
 * allocates, preserves errno. Async-signal-safe. */
void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* Formats into buf (always NUL-terminated); returns the length written.
 * Async-signal-safe. Does not allocate. */
size_t log_format(char *buf, size_t size, const char *fmt, va_list ap);
size_t log_snprintf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- reentrancy guard (guard.c) ------------------------------------------ */

/*
 * Per-thread state in initial-exec TLS (never allocates). in_agent > 0 means
 * "this thread is inside the agent": every interposer then forwards straight
 * to the real function, and signal handlers drop their sample. The agent's
 * own threads keep agent_thread set for their whole life.
 */
struct agent_tls {
    int in_agent;
    int agent_thread;
    int cancel_state; /* the host's cancel state while in_agent > 0 */
    int tid; /* this thread's id, 0 until spin_lock first needs it */
    int in_loader; /* > 0 inside the real dl_iterate_phdr (loader lock) */
    int phdr_busy; /* this thread's share of cpu_phdr_busy (phdr_cache.c) */
};
extern __thread struct agent_tls agent_tls
    __attribute__((tls_model("initial-exec")));

static inline int guard_active(void)
{
    return agent_tls.in_agent | agent_tls.agent_thread;
}

/*
 * The guard also keeps the agent's work out of the host's thread
 * cancellation. An interposed call is a cancellation point exactly when the
 * C library's function is one; but the work the agent does inside it (a
 * stack capture, whose unwinder may read() a pipe; a log line, which
 * write()s; opening a file) reaches real cancellation points, where a
 * pending deferred pthread_cancel would act: inside pthread_mutex_lock
 * after the mutex was taken and before the host's cleanup handler exists,
 * leaving the mutex held for ever. So the outermost guard_enter() disables
 * cancellation and the matching guard_leave() puts the host's state back.
 * Re-enabling never acts on a cancel that arrived meanwhile under deferred
 * cancellation (the host's next cancellation point does); in asynchronous
 * mode it acts at once, as the cancel signal would have, so a guard region
 * ends where the agent's state is settled (the signal handlers leave it
 * last). Every agent path that may reach a cancellation point runs inside
 * the guard; the fast paths of the interposers never enter it and pay
 * nothing.
 *
 * Async-signal-safe in practice: glibc's pthread_setcancelstate is a
 * compare-and-swap loop on the calling thread's own descriptor (not on
 * POSIX's list). A handler entering while the interrupted code is between
 * the decrement and the restore of guard_leave() saves and restores the
 * disabled state itself; the interrupted code restores from the copy it
 * read before the decrement.
 */
static inline void guard_enter(void)
{
    if (agent_tls.in_agent++ == 0) {
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        int old = PTHREAD_CANCEL_ENABLE;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
        agent_tls.cancel_state = old;
    }
}
static inline void guard_leave(void)
{
    int old = agent_tls.cancel_state;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (--agent_tls.in_agent == 0 && old != PTHREAD_CANCEL_DISABLE)
        pthread_setcancelstate(old, NULL);
}

/* 1 once the constructor has finished and the agent is enabled. */
extern volatile int agent_ready;
/* 1 once the host asked for a system-call filter (seccomp, through prctl
 * or syscall()): from then on the agent makes no system call it can do
 * without (a sandbox kills the caller of one it does not allow). Set by
 * the interposers, read anywhere. */
extern volatile int agent_sandboxed;

/* ---- loaded objects ------------------------------------------------------ */

/* The loaded-objects generation (objects.c): objects_changed() says that
 * objects were loaded or unloaded (the dlclose interposer, the program-
 * header snapshot); readers compare objects_generation() with the value
 * they last rebuilt at. Async-signal-safe. Does not allocate. */
void objects_changed(void);
unsigned objects_generation(void);

/* The address range [*lo, *hi) of the PT_LOAD segments of the loaded object
 * that holds addr; -1 (and 0, 0) when no object holds it. Takes the
 * loader's lock (dladdr, dl_iterate_phdr): set-up paths only. */
int object_range_of(const void *addr, uintptr_t *lo, uintptr_t *hi);

/* The C library's _dl_find_object (glibc 2.35 on: the object containing an
 * address, without the loader lock; async-signal-safe), or NULL when it
 * has none. Set by the constructor (phdr_hooks.c). */
struct dl_find_object;
extern int (*agent_find_object)(void *addr, struct dl_find_object *out);

/* The address range [*lo, *hi) of all of an object's PT_LOAD segments
 * (code and data), from its dl_iterate_phdr entry; *lo > *hi when it has
 * none. Async-signal-safe. Does not allocate. */
static inline void phdr_load_range(const struct dl_phdr_info *info,
                                   uintptr_t *lo, uintptr_t *hi)
{
    *lo = UINTPTR_MAX;
    *hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (start < *lo)
            *lo = start;
        if (start + ph->p_memsz > *hi)
            *hi = start + ph->p_memsz;
    }
}

/* ---- stack capture (stack.c) --------------------------------------------- */

/* Pseudo frames: stack entries below 4096 are never code addresses. The
 * recorders store them; the symbolizer names them (symbols_pseudo_name). */
#define FRAME_TRUNCATED 1 /* the stack was deeper than the agent keeps */
#define FRAME_LOST 2      /* samples that could not be taken or stored */
#define FRAME_UNKNOWN 3   /* no stack could be captured */
#define FRAME_UNAVAILABLE 4 /* a thread's stack could not be taken */
#define FRAME_PSEUDO_MAX 4096

#define STACK_MAX 128

/*
 * Captures the calling thread's stack as location addresses (callers'
 * return addresses minus one), leaf first, leaving out the agent's own
 * frames, with the unwind tables (agent/cfi.h). When the stack is deeper
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
 * interrupted (set and restored by each handler), so that a signal landing
 * inside that handler is charged to the host (stack_unwind_signal). */
extern __thread const void *stack_signal_outer
    __attribute__((tls_model("initial-exec")));

/* Records the signal-return trampoline of the handler just installed for
 * sig (its sa_restorer), so that a sample that interrupts one of the
 * agent's own handlers is charged to the host's stack under it
 * (stack_unwind_signal). Call after each sigaction that installs one.
 * Not async-signal-safe. */
void stack_note_handler(int sig);

/* ---- fork (fork.c): the one ordered list of fork handlers ---------------- */

/* Turns on the agent's fork handlers (registered once, before any other
 * constructor of the agent): the modules' steps, and the process shell's
 * (shell_prepare runs first of the prepare steps, shell_child after the
 * agent's own child steps; shell_after in the child once every fork
 * handler of the host ran too: see fork.c; any may be NULL). Called once
 * by the constructor. Not async-signal-safe. */
void fork_init(void (*shell_prepare)(void), void (*shell_child)(void),
               void (*shell_after)(void));
/* In a fork child: forgets the forking thread's cached thread id (guard.c).
 * Async-signal-safe. */
void guard_fork_child(void);

/* Starts fn(arg) on a new thread of the agent's own: created with the
 * guard entered (thread_hooks.c marks it the agent's, never sampled) and
 * every signal blocked (it inherits that mask), as civetweb's threads.
 * Detached, or joinable with its id in *joinable when that is not NULL.
 * Returns 0 or -errno. Not async-signal-safe. */
int agent_thread_spawn(void *(*fn)(void *), void *arg, pthread_t *joinable);

/* Address range of the agent's own code, to strip its frames. */
extern uintptr_t stack_self_start, stack_self_end;
/* 1 when pc lies in the agent's own code. Async-signal-safe. */
static inline int stack_is_self(uintptr_t pc)
{
    return pc >= stack_self_start && pc < stack_self_end;
}
/* The C library's signal-return trampoline (x86-64 glibc's __restore_rt,
 * the sa_restorer of every handler installed through its sigaction); 0
 * until stack_note_handler saw one. */
extern uintptr_t stack_sigreturn_at;
/* Records the agent's own text range. Not async-signal-safe. */
void stack_init(void);

/* ---- stack table (stack_table.c) ----------------------------------------- */

/*
 * Interns stacks (plus an optional integer key, such as an allocation size)
 * and keeps nvalues int64 counters per distinct entry. Memory comes from
 * mmap, never from the host allocator; entries are never removed, so a
 * profile can read them while threads keep adding.
 */
struct stack_table;

struct stack_entry {
    struct stack_entry *next_all; /* list of every entry, newest first */
    uint64_t hash;
    uint64_t key;
    int depth;
    int64_t *values;    /* nvalues counters, updated with atomics */
    uintptr_t pcs[];    /* depth entries, leaf first */
};

/* Creates a table with nvalues counters per entry and room for about
 * capacity entries. NULL on failure. Not async-signal-safe. */
struct stack_table *stack_table_create(int nvalues, size_t capacity);
/* Returns the entry for (pcs, key), adding it if new; NULL when the table is
 * full (the caller counts a loss). Thread-safe; takes a spinlock only to
 * insert. Not async-signal-safe. Does not allocate. */
struct stack_entry *stack_table_get(struct stack_table *t,
                                    const uintptr_t *pcs, int depth,
                                    uint64_t key);
/* First entry of the list of all entries (read with acquire). */
struct stack_entry *stack_table_first(struct stack_table *t);
/* Number of entries. */
size_t stack_table_count(struct stack_table *t);
/* Adds v to counter i of e atomically. Async-signal-safe. */
static inline void stack_entry_add(struct stack_entry *e, int i, int64_t v)
{
    __atomic_fetch_add(&e->values[i], v, __ATOMIC_RELAXED);
}
static inline int64_t stack_entry_value(const struct stack_entry *e, int i)
{
    return __atomic_load_n(&e->values[i], __ATOMIC_RELAXED);
}

/*
 * A copy of a table's counters at one moment, for encoding and for deltas
 * (?seconds=N). Entries are never removed from a table, so an entry pointer
 * identifies the same stack in two snapshots. Memory from malloc (taken on
 * the agent's threads only).
 */
struct stack_snapshot {
    struct stack_entry **entries;
    int64_t *values; /* n * nvalues */
    size_t n;
    int nvalues;
};
/* Copies every entry's counters. Returns 0 or -ENOMEM.
 * Not async-signal-safe. */
int stack_table_snapshot(struct stack_table *t, struct stack_snapshot *out);
/* Subtracts earlier from later, entry by entry (entries new in later keep
 * their values). Not async-signal-safe. */
void stack_snapshot_subtract(struct stack_snapshot *later,
                             const struct stack_snapshot *earlier);
/* Frees a snapshot. Not async-signal-safe. */
void stack_snapshot_free(struct stack_snapshot *s);

/* ---- growing arrays (array.c) ------------------------------------------- */

/* Makes room for `want` elements of `size` bytes in *v, whose room is *cap
 * elements: at least doubles, starting at `first`. 0, or -ENOMEM with *v
 * and *cap unchanged. Not async-signal-safe (realloc). */
int array_reserve(void **v, size_t *cap, size_t want, size_t size,
                  size_t first);
#define ARRAY_RESERVE(v, cap, want, first)                                     \
    array_reserve((void **)&(v), &(cap), (want), sizeof *(v), (first))

/* ---- small internal allocator (arena.c) ---------------------------------- */

/* Returns zeroed memory from mmap that is never freed; NULL on failure.
 * Thread-safe. Not async-signal-safe. Does not allocate through malloc. */
void *arena_alloc(size_t size);

/* ---- the agent's own memory (own_memory.c) ------------------------------- */

/* Registers [p, p + len), mapped by the agent for itself (tables, arena
 * chunks, its threads' stacks), so /debug/memory can count its resident
 * pages (mincore) apart from the host's; remove before unmapping. A full
 * registry drops the range (counted as unregistered).
 * Not async-signal-safe. Does not allocate. */
void own_memory_add(const void *p, size_t len);
/* The same for one of the agent's threads' stacks. */
void own_memory_add_stack(const void *p, size_t len);
void own_memory_remove(const void *p, size_t len);

/* Resident and mapped bytes of the registered ranges, and the number of
 * ranges that did not fit in the registry. Not async-signal-safe. */
struct own_memory_usage {
    size_t resident;
    size_t mapped;
    size_t stack_resident; /* of which the agent's threads' stacks */
    size_t ranges;
    long dropped;
};
void own_memory_usage(struct own_memory_usage *out);

/* ---- spinlock for the agent's tables ------------------------------------- */

/* The agent never uses the host's (interposed) pthread mutexes for its own
 * tables: a spinlock that yields is enough for the short insert paths. */
typedef struct {
    int locked; /* the holder's thread id; 0 when free */
} spinlock_t;
/* Takes l; a lock whose holder is not a thread of this process (held in
 * the parent at fork time) is taken over (guard.c). Not async-signal-safe.
 * Does not allocate. */
void spin_lock(spinlock_t *l);
static inline void spin_unlock(spinlock_t *l)
{
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

/* ---- threads (thread_hooks.c, threads.c) --------------------------------- */

/* Stacks that created threads: one counter (threads created). */
extern struct stack_table *threadcreate_table;
/* Number of host threads created since the agent loaded. */
extern long threads_created;

/* Real pthread_create, resolved on first use. */
extern int (*real_pthread_create)(pthread_t *, const pthread_attr_t *,
                                  void *(*)(void *), void *);
/* Resolves the real_* pointers of this file. Not async-signal-safe. */
void thread_hooks_init(void);

/* ---- borrowed signals (signals.c) ------------------------------------------ */

/* Installs handler (SA_SIGINFO | SA_RESTART, blocking mask while it runs;
 * NULL: nothing more) on the first signal from first to last (either way
 * round, skipping skip; 0: none) that the host leaves at its default
 * action; the action it had goes to *saved. Returns the signal or -EAGAIN.
 * Not async-signal-safe. */
int signals_borrow(int first, int last, int skip,
                   void (*handler)(int, siginfo_t *, void *),
                   const sigset_t *mask, struct sigaction *saved);

/* Gives sig back as saved, unless the host has replaced handler meanwhile;
 * what is still pending of it is discarded first. Not async-signal-safe. */
void signals_give_back(int sig, void (*handler)(int, siginfo_t *, void *),
                       const struct sigaction *saved);

/* Around fork, on the forking thread: block sig (a profile's timer signal)
 * until signals_fork_restore() puts back the mask the thread had before
 * the first such block. Not async-signal-safe. */
void signals_fork_block(int sig);
void signals_fork_restore(void);
/* In a fork child, whose profile is gone with its parent's threads and
 * timers: the host's disposition of sig back (saved when the agent
 * installed its handler, *installed), and the signal no longer taken
 * (*taken). Async-signal-safe. */
void signals_fork_child_reset(int sig, int *installed,
                              const struct sigaction *saved, int *taken);

/* Takes a profile's one session (*taken from 0 to 1): 0, or -EBUSY when a
 * session already holds it. Async-signal-safe. */
static inline int session_take(int *taken)
{
    int expected = 0;
    return __atomic_compare_exchange_n(taken, &expected, 1, 0,
                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)
               ? 0
               : -EBUSY;
}

/* Thread tid's CPU-time clock, for clock_gettime and timer_create: the
 * kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), which glibc only
 * gives for threads of its own (pthread_getcpuclockid). */
static inline clockid_t thread_cpu_clock(int tid)
{
    return (clockid_t)(((unsigned)~tid << 3) | 6);
}

/* A timer on thread tid's CPU clock that sends sig to tid with value in
 * si_value (the CPU and wall profiles' per-thread timers): the kernel
 * timer id, or -errno. Disarmed until thread_timer_set. */
int thread_timer_create(int tid, int sig, uint64_t value);
/* Arms a thread timer: first expiry after `first` ns of the thread's CPU
 * time, then every `period` ns (0, 0: disarmed). 0 or -errno. Both are
 * system calls only: async-signal-safe, no allocation. */
int thread_timer_set(int id, int64_t first, int64_t period);

/* ---- signal masks (sigmask.c, sigmask_hooks.c) ---------------------------- */

/*
 * The agent never sends its signals (the CPU profile's, the threads dump's)
 * to a thread that blocks them; see sigmask.c for the protocol between the
 * senders and the host's mask changes.
 */

/* Host threads inside an unwatched mask change; > 0 while a profile runs or
 * a dump asks; the lock that keeps a thread's change and a sender's look
 * at that thread apart. */
extern int sigmask_changing;
extern int sigmask_watched;
extern spinlock_t sigmask_lock;

/* The C library's pthread_sigmask, for the agent's own mask changes (which
 * must not go through the interposer). Async-signal-safe. */
int sigmask_real(int how, const sigset_t *set, sigset_t *old);

/* Begins/ends a period in which the agent may send signals to host
 * threads: from the beginning on, every host mask change takes
 * sigmask_lock. Begin waits for the changes already under way.
 * Not async-signal-safe. */
void sigmask_watch_begin(void);
void sigmask_watch_end(void);

/* 1 when thread tid blocks sig, 0 when it does not (its /proc status), -1
 * when that cannot be read (the thread is gone?). Call with sigmask_lock
 * held to send on the answer. Not async-signal-safe. */
int sigmask_thread_blocks(int tid, int sig);
/* 1 when sig is pending for thread tid itself (not process-wide).
 * Not async-signal-safe. */
int sigmask_thread_pending(int tid, int sig);
/* 1 when the calling thread blocks sig. Async-signal-safe. */
int sigmask_self_blocks(int sig);
/* In a forked child: forgets the parent's watchers and changers.
 * Not async-signal-safe. */
void sigmask_fork_child(void);

/* ---- clock (clock.c) ---------------------------------------------------- */

/* Seconds since the Unix epoch, in ns (clock.c). Async-signal-safe. */
int64_t agent_now_ns(void);
/* CLOCK_MONOTONIC in ns, for intervals (clock.c). Async-signal-safe. */
int64_t agent_mono_ns(void);
/* Time the agent loaded, in ns since the epoch (set by the constructor). */
extern int64_t agent_start_ns;

#endif
