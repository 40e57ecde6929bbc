/*
 * Operations: what an operator needs around the endpoints, as the
 * recording layer keeps it (the process shell, process/process.h, acts on
 * it; http/ shows it).
 *
 * - The configuration of the shell (config.c): run directory, children,
 *   dumps, start delay.
 * - The run directory (host/rundir.c): one small file per serving process
 *   ("pid ppid program address"), so that every worker of a multi-process
 *   service can be found, and the index page can link to all of them.
 *
 * Contexts: the init functions run in the constructor or a fork child
 * handler; the rest on the agent's own threads.
 */
#ifndef PPROF_OPS_H
#define PPROF_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- configuration (config.c) --------------------------------------------- */

enum children_policy { CHILDREN_OFF = 0, CHILDREN_SERVE = 1 };

extern char opt_run_dir[1024];   /* PPROF_RUN_DIR, "" = off */
extern int opt_children;         /* PPROF_CHILDREN */
extern int opt_exec_children;    /* PPROF_EXEC_CHILDREN (default off) */
/* 1 when this process was exec'd by another one under the agent
 * (rundir_env_from_ancestor, set by the constructor before config_load()).
 * Its default log level is quiet. */
extern int config_exec_child;
extern char opt_dump_dir[1024];  /* PPROF_DUMP_DIR, "" = off */
extern int opt_dump_signal;      /* PPROF_DUMP_SIGNAL, 0 = none */
extern long opt_dump_interval;   /* PPROF_DUMP_INTERVAL, seconds; 0 = none */
extern long opt_start_delay_ms;  /* PPROF_START_DELAY_MS; 0 = in the constructor */
/* PPROF_MEMORY_DUMP_AT: a heap dump when the memory limit's usage
 * crosses this many bytes, or this percentage of the limit (one of the two
 * is 0); PPROF_MEMORY_DUMP_GAP: seconds at least between two. */
extern long opt_memory_dump_bytes;
extern long opt_memory_dump_percent;
extern long opt_memory_dump_gap;

/* Reads PPROF_RUN_DIR, PPROF_CHILDREN, PPROF_EXEC_CHILDREN, PPROF_DUMP_DIR,
 * PPROF_DUMP_SIGNAL and PPROF_DUMP_INTERVAL (bad values: one line, then the default). Called by
 * config_load(). Not async-signal-safe. */
void config_load_ops(void);

/* ---- run directory (rundir.c) --------------------------------------------- */

/* Longest family id, with its terminating NUL. */
#define RUNDIR_FAMILY_MAX 48

/* One announced process, as read back from the run directory. */
struct rundir_entry {
    int pid;
    int ppid;
    char program[64];
    char addr[96]; /* host:port */
    char family[RUNDIR_FAMILY_MAX]; /* "" when announced without one */
};

/*
 * Creates this process's announcement file (empty) and keeps a descriptor
 * on it, so it can be filled later even after the process gave up the
 * rights to write in the directory (nginx workers switch to an unprivileged
 * user right after fork). Creates the directory (mode 0700) when missing,
 * and refuses one that is not this user's or that others can write to.
 * Returns 0 or -errno (logged once). Uses only system calls: safe in a fork
 * child handler. Not async-signal-safe (the log line).
 */
int rundir_reserve(void);

/*
 * Sets this process's family id (rundir.c's opening comment): from
 * PPROF_FAMILY when valid, else from the parent's announcement (with a
 * run directory), else a new family ("pid.starttime" of this process), and
 * puts it in PPROF_FAMILY for exec'd children. Called once by the
 * constructor, before main(). Not async-signal-safe.
 */
void rundir_family_init(void);

/* This process's family id. Async-signal-safe. */
const char *rundir_family(void);

/* 1 when the family came from an ancestor (PPROF_FAMILY, or the parent's
 * announcement): this process was exec'd by one under the agent.
 * Async-signal-safe. */
int rundir_family_inherited(void);

/* 1 when PPROF_FAMILY names a process other than this one: an ancestor
 * under the agent exec'd this process (or one it came from); 0 without
 * it, or when it names this process, which exec'd itself into a new image
 * (a wrapper). Called by the constructor, before config_load(). Not
 * async-signal-safe. */
int rundir_env_from_ancestor(void);

/* 1 when PPROF_FAMILY names this very process (pid and start time): an
 * earlier image of it loaded the agent and exec'd this one (a wrapper: a
 * pyenv shim, env, a shell's exec). *lived_ns is then how long the process
 * has lived, all its images (at least that: its start is rounded down to
 * the clock tick). Called by the constructor. Not async-signal-safe. */
int rundir_env_own(int64_t *lived_ns);

/* Writes "pid ppid starttime program host:port family\n" into this
 * process's file with one write (reserving it first when needed). Returns
 * 0 or -errno. Not async-signal-safe. */
int rundir_publish(const char *addr);

/* Removes this process's file (at exit), unless the process sandboxed
 * itself (agent_sandboxed). Async-signal-safe. */
void rundir_remove(void);

/* At exit, from the atexit handler: rundir_remove(), and when this
 * process announced itself and is its family's first, removes the files
 * of processes that are gone, whatever their family (its workers that
 * could not remove their own: switched to another user, chrooted or
 * killed). Not async-signal-safe. */
void rundir_leave(void);

/* After an exec: the file of this pid that the image before it reserved
 * (a root service's forked child, in its fork handler) becomes this
 * image's, so that its exit removes it. Not async-signal-safe. */
void rundir_adopt(void);

/* Calls fn for every announced process of this process's family still
 * alive (pid exists with the announced start time) and removes the files
 * of dead processes, whatever their family. Returns how many were listed.
 * Not async-signal-safe. */
size_t rundir_list(void (*fn)(void *arg, const struct rundir_entry *e),
                   void *arg);

/* Program name of this process (its /proc comm, at most 15 characters).
 * Not async-signal-safe. */
void rundir_program(char *out, size_t size);

#endif
