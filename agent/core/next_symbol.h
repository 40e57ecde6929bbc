/*
 * The next definition of a C-library name after the agent, as
 * dlsym(RTLD_NEXT, name) finds it, at a fraction of its cost: see
 * next_symbol.c. Async-signal-safe when it answers from the hash tables;
 * it falls back to dlsym (not async-signal-safe) for IFUNC and thread-local
 * names, names it does not find, and a dlopen'ed agent.
 */
#ifndef PPROF_NEXT_SYMBOL_H
#define PPROF_NEXT_SYMBOL_H

void *next_symbol(const char *name);

/* The definition of a name the process's calls bind (dlsym(RTLD_DEFAULT,
 * name)): the agent's own door when it is first, a sanitizer's or another
 * preloaded library's when that one is. The same lookup and the same
 * fallback to dlsym as next_symbol, searched from the start of the
 * loader's list. */
void *first_symbol(const char *name);

/* The hash-table answer alone: NULL where next_symbol asks dlsym. For the
 * unit test, which holds the two to the same answers. */
void *next_symbol_fast(const char *name);

/* 1 when the process runs under glibc's loader; 0 under another one
 * (musl's), where the agent loads but stands aside: every interposer only
 * forwards (process/init.c, docs/operations.md). A test of one weak
 * reference, for start-up code only. */
int loader_is_glibc(void);

#endif
