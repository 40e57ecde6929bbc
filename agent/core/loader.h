/* The loader's calls made by the agent's own code, and the fork gate
 * (core/loader.c). */

#ifndef PPROF_AGENT_LOADER_H
#define PPROF_AGENT_LOADER_H

#include <dlfcn.h>
#include <link.h>

/* The C library's dl_iterate_phdr, found at load (next_symbol). */
extern int (*real_dl_iterate_phdr)(int (*)(struct dl_phdr_info *, size_t,
                                           void *),
                                   void *);

/*
 * The fork gate. Every call the agent makes into the C library that takes
 * a lock fork() does not reset in the child (the loader's object list, the
 * resolver's) is made inside the gate; the forking thread closes the gate
 * in the agent's prepare step and waits until no agent call is inside, so
 * the child never inherits such a lock held by one of the agent's
 * threads. An agent call that finds the gate closed waits until the fork
 * returned in the parent, and goes before the next fork (a thread that
 * forks in a loop would otherwise keep it out). Nested entries on one
 * thread count once.
 * Not async-signal-safe (it may wait). Does not allocate.
 */
void loader_gate_enter(void);
void loader_gate_leave(void);

/* The fork steps (agent/fork.c): prepare closes the gate and waits (2 s at
 * most: an agent call that never leaves must not hang the host's fork);
 * parent opens it; child opens it with nobody inside but the forking
 * thread's own entries. Does not allocate. */
void loader_fork_prepare(void);
void loader_fork_parent(void);
void loader_fork_child(void);
/* Forks whose prepare step gave up waiting, in this process. */
unsigned long loader_fork_gave_up(void);

/* The loader's functions, inside the gate. Same contracts as the C
 * library's. Not async-signal-safe. */
int loader_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *),
                        void *data);
int loader_addr(const void *addr, Dl_info *info);
void *loader_open(const char *file, int mode);
void *loader_sym(void *handle, const char *name);
int loader_info(void *handle, int request, void *arg);

#endif
