/*
 * The process shell: what sits on top of every layer and decides for the
 * process as a whole (docs/layout.md).
 *
 * - Children (children.c): the fork policy. A child forked without exec
 *   (nginx and PostgreSQL workers, prefork servers) gets a server of its
 *   own on port 0, started a moment after the fork by a small agent thread,
 *   and announces it in the run directory.
 * - The deferred start (start.c) and the credential hooks (cred_hooks.c).
 * - Dumps (dump.c, dump_signal.c): profiles written to files
 *   (PPROF_DUMP_DIR) at exit, on a signal the operator chooses and at an
 *   interval, for batch jobs and programs that live seconds.
 *
 * Contexts: the init functions run in the constructor; the fork handlers
 * run in the forking thread (prepare, parent) and in the child's only
 * thread (child); the dump signal handler runs anywhere; everything else
 * runs on the agent's own threads or in the host's exit path.
 */
#ifndef PPROF_PROCESS_H
#define PPROF_PROCESS_H

#include <stdint.h>

#include "agent/core/ops.h"

#include <signal.h>
#include <stddef.h>

/* ---- children (children.c) ------------------------------------------------ */

/* Reads the family id and registers the exit hook. Called once by the
 * constructor. Not async-signal-safe. */
void children_init(void);
/* The shell's fork steps (in agent/fork.c's list, through fork_init):
 * prepare notes the forking pid; child marks this process forked, resets
 * the dumper and the server, lets the parent's listening socket go and
 * notes that the child's own start is due (PPROF_CHILDREN): no
 * allocation, no thread, no file, no lock (the host's own child handlers
 * have not run yet). Async-signal-safe. */
void children_fork_prepare(void);
void children_fork_child(void);

/* The fork after step, once every fork handler ran (fork.c's fork() and
 * daemon(); the credential hooks call it too, for a fork the agent did
 * not see return): starts the child's own start when one is due in this
 * process. Not async-signal-safe. */
void children_after_fork(void);

/* 1 in the process the agent's state was set up for (the constructor's or
 * a fork child's), 0 in a process made without fork handlers (a raw
 * clone): the pid read from the kernel. Async-signal-safe. */
int children_own(void);
/* The pid the agent's state is for (children_own's). */
int children_own_pid(void);

/* 1 in an exec'd descendant of a process under the agent (and in the
 * children it forks) unless PPROF_EXEC_CHILDREN=serve: no thread, no
 * port, no file, no line. Async-signal-safe. */
int children_passive(void);

/* Makes an exec'd descendant that took the serving role (role.c) a
 * process started by hand: it serves, writes PPROF_PORT_FILE, and says so
 * at the default log level unless PPROF_LOG says otherwise. On the
 * agent's starter. Not async-signal-safe. */
void children_take_role(void);

/* Forks this process made through fork() since it was set up (counted
 * by the prepare step; vfork, posix_spawn and raw clones are not).
 * Async-signal-safe. */
int children_forks(void);

/* ---- the serving role handed down by a wrapper (role.c) -------------------- */

/* In the constructor of an exec'd descendant that would be passive:
 * returns 1 when it is a candidate for the role (PPROF_ROLE_FROM names
 * its parent, which forked it first, on its only thread), which then
 * keeps the agent on, samples no allocation, arms its start and names
 * itself to its own first child; 0 otherwise, with no system call when
 * the variable is absent or blank. Not async-signal-safe. */
int role_candidate(void);
/* In the constructor of a process started by hand that may hand the role
 * down: names it in PPROF_ROLE_FROM (on its only thread). Not
 * async-signal-safe. */
void role_hand_down(void);
/* The fork prepare step (first: this process's first fork through
 * fork()): from the second fork on, or with threads, blanks in place the
 * variable this process set, before the child copies it. Async-signal-
 * safe. */
void role_fork_prepare(int first);

/* Arms a candidate's start: its own calls look for the offer (no
 * thread, three system calls every 50 ms at most, 10 s at most); the
 * starter is created once it took the role. No system call. */
void role_arm(void);
/* On the starter, once the delay ended, before anything starts: in a
 * candidate, the bookkeeping of the role it took (returns 1, leave, when
 * it holds none); then role_down. gone() says the process is ending. Guard
 * entered. Not async-signal-safe. */
int role_gate(int (*gone)(void));
/* In the heir: 1 while the process that handed the role down writes
 * PPROF_PORT_FILE for it (it kept the rights the heir may have given
 * up); role_listening(port) tells it the port. Not async-signal-safe. */
int role_relays_port(void);
void role_listening(int port);
/* Offers the role to this process's only child when its main thread only
 * waits for it, and holds it while the heir lives. Returns 1 when the
 * process ended meanwhile (start nothing), 0 to start as usual. */
int role_down(int (*gone)(void));

/* ---- _exit and _Exit (exit_hooks.c) -------------------------------------- */

/* Resolves the C library's _exit. Called once by the constructor. */
void exit_hooks_init(void);

/* 1 in a process that was forked (without exec) from one under the agent. */
extern int children_is_forked;

/* Whether this process writes PPROF_PORT_FILE: yes unless it is an exec'd
 * descendant (the file names the process started with it) or a forked
 * child whose parent still lives (the file names the parent; a daemon
 * whose parent exited takes it over). Not async-signal-safe. */
int children_port_file(void);

/* 1 in a forked child whose forking parent still lives (a worker): it
 * serves on port 0 at once, leaving the configured port to the parent,
 * which may not have bound it yet (both start after the same delay).
 * Not async-signal-safe. */
int children_parent_lives(void);

/* When the configured port cannot be had and a run directory is in use,
 * rewrites addr (civetweb's syntax) to port 0 on the same host and returns
 * 1; otherwise 0. Not async-signal-safe. */
int children_port0(char *addr, size_t size);

/* Called by the server once it listens on port: announces this process in
 * the run directory (reserving its file first when not done yet).
 * Not async-signal-safe. */
void children_announce(int port);

/* ---- the constructor (init.c) and the attach (attach.c) ------------------ */

/* Builds the agent's tables and resolves the C library's functions, as
 * the constructor does; the unwind tables wait for the starter when
 * defer_tables is set. Once per process. Not async-signal-safe. */
void init_tables(int defer_tables);

/* In the constructor: 1 when the agent was loaded by dlopen into a
 * process already running (pprof-attach), after the C library; 0 when it
 * was preloaded. Sets the state pprof-attach reads. Not
 * async-signal-safe. */
int attach_loaded_late(void);

/* Exported for pprof-attach, which makes a stopped host thread call
 * them (not an API: absent from pprofagent.h). pprof_attach_start() takes
 * the settings ("NAME=value" lines), builds the tables once and creates
 * the starter; pprof_attach_stop() creates the thread that stops the
 * server. Both return at once: 0, or a code pprof-attach explains
 * (attach.c). Not async-signal-safe. */
int pprof_attach_start(const char *settings);
int pprof_attach_stop(void);

/* 1 once attached: the starter serves and starts nothing else. */
extern int start_attached;

/* On the starter of an attached agent, once the server listens or could
 * not: tells pprof-attach where it serves, or goes back to detached.
 * Not async-signal-safe. */
void attach_served(void);

/* ---- the doors an attach binds (attach_doors.c, attach_relocs.c) ------- */

/* A door: its name, the agent's definition and the C library's function
 * it forwards to. */
struct attach_door {
    const char *name;
    uintptr_t agent, real;
};
/* Finds every door's two definitions. Returns 0, or -ENOENT when none
 * (the agent's own handle or the C library's names not found). On the
 * starter. Not async-signal-safe. */
int attach_doors_init(void);
/* The index of the door called name, -1 when it is none. Does not
 * allocate. Async-signal-safe. */
int attach_door_find(const char *name);
/* Door i (0 <= i < what attach_door_find() returned). Async-signal-safe. */
const struct attach_door *attach_door(int i);

/* Points the loaded objects' GOT entries of the doors (JUMP_SLOT and
 * GLOB_DAT) that lead to the C library's functions at the agent's,
 * except the agent's, the C library's and the loader's own; keeps what
 * they held. Returns how many were rewritten, or -ENOENT. On the starter
 * of an attached agent, guard entered. Not async-signal-safe. */
int attach_relocs_bind(void);
/* Puts back what attach_relocs_bind() and attach_relocs_rescan()
 * rewrote, where the entry still leads to the agent and its object is
 * still loaded. Returns how many. On the detacher, the rescanner ended.
 * Not async-signal-safe. */
int attach_relocs_unbind(void);
/* When the loader added objects since the last bind or rescan: their
 * doors' relocations pointed at the agent as attach_relocs_bind() does
 * (only objects whose load has ended). Returns how many were rewritten
 * (0 when nothing was added), or -EAGAIN when an object was unloaded
 * meanwhile (the next call tries again). On the rescanner, guard
 * entered. Not async-signal-safe. */
int attach_relocs_rescan(void);

/* A round of attach_relocs.c (attach_round.c). begin notes the objects
 * loaded now and waits until a load under way ended (the loader's lock
 * taken and left); returns the loader's count of additions then. cut,
 * in a dl_iterate_phdr callback with its info and size: 1 when an object
 * was unloaded since begin (the round must write nothing), and stays 1
 * until the next begin; with info NULL it only answers. holds: 1 when an
 * object at base was noted by begin (loaded, its load ended). gone: 1
 * when no object was at base then (0 when begin could not note every
 * object). Guard entered, one thread at a time. Not async-signal-safe. */
struct dl_phdr_info;
unsigned long long attach_round_begin(void);
int attach_round_cut(const struct dl_phdr_info *info, size_t size);
int attach_round_holds(uintptr_t base);
int attach_round_gone(uintptr_t base);

/* The rescanner (attach_rescan.c): a thread of the agent's that calls
 * attach_relocs_rescan() every 250 ms while attached. Started once the
 * attach serves; stop ends it and waits for it (nothing when it was not
 * started). On the starter and the detacher. Not async-signal-safe. */
void attach_rescan_start(void);
void attach_rescan_stop(void);

/* On the starter, once the doors are bound (bound > 0) or could not be:
 * what the heap and contention profiles say about the attach.
 * Not async-signal-safe. */
void attach_say(int bound);

/* Waits until the starter created for the attach did its work (or left).
 * Not async-signal-safe. */
void start_wait_done(void);
/* After a detach stopped the server: the next attach starts it again.
 * Not async-signal-safe. */
void start_attached_reset(void);

/* ---- the shell's threads (start.c) ---------------------------------------- */

/* Each of the shell's threads (the starter, watch, dumps, push, rescanner)
 * begins named title (NULL: the name it inherited) and recorded as one
 * of the agent's, so that a CPU profile never takes it for a host thread
 * (attached, the C library's pthread_create made it, past the door that
 * records the agent's threads), and is forgotten as it ends. Not
 * async-signal-safe. */
void shell_thread_begin(const char *title);
void shell_thread_end(void);

/* Defines the thread function name(arg) of one of the shell's threads:
 * name_body(arg), defined after it, between agent_thread_begin/end
 * (agent/guard.h) and shell_thread_begin/end. */
#define SHELL_THREAD_MAIN(name, title)                                         \
    static void *name##_body(void *);                                          \
    AGENT_THREAD_MAIN(name)                                                    \
    static void *name##_run(void *arg)                                         \
    {                                                                          \
        shell_thread_begin(title);                                             \
        void *ret_ = name##_body(arg);                                         \
        shell_thread_end();                                                    \
        return ret_;                                                           \
    }

/* ---- deferred start (start.c) ------------------------------------------- */

/* Arms the deferred start (agent/core/arm.h) for process pid: nothing is
 * created until a host call shows the process lives on; then
 * start_later(dumps, now). No system call, no allocation. */
void start_arm(int dumps, int pid);

/* Creates the agent thread that, once opt_start_delay_ms have passed
 * since from_ns (CLOCK_MONOTONIC), starts the dumps (when dumps is set: a
 * forked child's) and the server (unless serving is off, or this is a
 * forked child and PPROF_CHILDREN=off). Returns 0 or -errno (no thread).
 * Not async-signal-safe. */
int start_later(int dumps, int64_t from_ns);

/* Around a host call that needs the process to have one thread, or that
 * the C library applies to every thread (user and group IDs): while the
 * start delay runs, start_pause() makes the agent's one thread leave and
 * returns 1, and start_resume() brings it back with the same deadline;
 * otherwise start_pause() returns 0 and changes nothing. Not
 * async-signal-safe. */
int start_pause(void);
void start_resume(void);

/* Starts the server now, unless it was started already in this process.
 * Not async-signal-safe. */
void start_now(void);

/* At exit: a starter still waiting leaves and is joined, so that it holds
 * no memory when the process ends (valgrind's leak check counted its
 * thread's as "possibly lost"). Not async-signal-safe. */
void start_leave(void);

/* Called by the credential hooks before the host changes its user or group
 * while it is root: creates the announcement file (and, but in a forked
 * child, the port file) while the process may, unless the server started
 * already. Once per process; nothing in a process that will not serve.
 * Not async-signal-safe. */
void start_before_drop(void);

/* 1 when this process serves or will: serving is on, and it is not a
 * passive descendant, a process made without fork handlers or a forked
 * child with PPROF_CHILDREN=off. Not async-signal-safe. */
int start_would_serve(void);

/* Called by the hooks of setrlimit and prlimit when they lower
 * RLIMIT_NPROC, before the real call: when the start delay runs in this
 * process, the starter leaves and what it would do (the server, its
 * threads, the announcement, the watch, the dumps, the push) is done now,
 * on the calling thread. Otherwise nothing. Not async-signal-safe. */
void start_before_confine(void);

/* Called by the chroot hook before the real call: opens what the agent
 * reads later by a path the chroot would hide (confine.c). Not
 * async-signal-safe. */
void confine_prepare(void);

/* ---- dumps (dump.c) ------------------------------------------------------- */

/* When PPROF_DUMP_DIR is set: starts the whole-run CPU profile, installs
 * the dump signal's handler (unless the host handles that signal), starts
 * the dump thread and registers the exit dump. Also called in a forked
 * child (children.c) to start that child's own dumps. Not
 * async-signal-safe. */
void dump_start(void);

/* Ends the dumps an attached agent started (the detacher): the dump
 * thread joined, the signal given back as it was found (unless the host
 * replaced the handler meanwhile), the last dump written (the whole
 * attach's CPU profile, which stops), the signal's pipe closed. Nothing
 * when no dumps run. Not async-signal-safe. */
void dump_stop(void);

/* Resets the dumper's state in a fork child (the dump thread is gone);
 * in a child of an attached agent, which starts no dumps, the dump
 * signal's disposition goes back to the host's. Async-signal-safe. */
void dump_fork_child(void);

/* Writes every dump profile now, on the calling thread (the dump thread or
 * the exit path). reason is "exit", "signal" or "interval". Returns the
 * number of files written. Not async-signal-safe. */
int dump_now(const char *reason);

/* The watch's evidence, in PPROF_DUMP_DIR (nothing without it): a new
 * cycle's report (<stem>.deadlock.txt) and a threads dump (.threads.txt);
 * the memory limit's crossing (summary, one line, in .memory.txt), the
 * heap and peak profiles and the memory breakdown (.memory.json). Return
 * the number of files written. Agent threads. Not async-signal-safe. */
struct deadlock_report;
int dump_deadlock(const struct deadlock_report *r);
int dump_memory(const char *summary);

/* ---- the watch (watch.c) -------------------------------------------------- */

/* Starts the watch thread of this process, when it serves or writes dumps
 * (once per process: a forked child starts its own): the deadlock watch every second when
 * PPROF_DEADLOCK_SECONDS is not 0, and with PPROF_DUMP_DIR the memory
 * limit every 200 ms. Not async-signal-safe. */
void watch_start(void);
/* Ends the watch an attached agent started and waits for it (a second
 * at most); nothing when there is none. On the detacher. Not
 * async-signal-safe. */
void watch_stop(void);

/* Files written since start (read with a relaxed atomic load). */
extern long dump_files_written;

/* ---- the dump signal (dump_signal.c) ------------------------------------- */

/* The pipe from the dump signal's handler (writes one byte to [1]) to the
 * dump thread (reads [0]); -1 when closed. Owned by dump.c. */
extern int dump_wake_pipe[2];

/* The PPROF_DUMP_SIGNAL handler (SA_SIGINFO): one write to
 * dump_wake_pipe[1] unless it is -1, errno kept, counted in
 * dump_signal_running while it reads and writes the pipe (dump.c closes
 * it once that count is 0). Async-signal-safe. */
void dump_on_signal(int sig, siginfo_t *si, void *uc);
extern int dump_signal_running;

/* Does nothing: the agent's DT_FINI (init.c). */
void agent_dt_fini(void);

#endif
