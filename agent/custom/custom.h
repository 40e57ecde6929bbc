/*
 * Custom profiles (pprofagent.h's pprof_profile_*), as Go's pprof.NewProfile:
 * a named set of keys, each with the stack that added it. Owned by
 * agent/custom/custom.c; read by http/custom.c (serving) and http/index.c
 * (rows).
 *
 * Host threads add and remove keys in normal context; HTTP workers read the
 * registry and snapshot a profile's stack table. Profiles are never freed.
 */
#ifndef PPROF_CUSTOM_H
#define PPROF_CUSTOM_H

#include <stddef.h>
#include "agent/stacks/stack_table.h"

#define CUSTOM_MAX_PROFILES 64
#define CUSTOM_NAME_MAX 128

struct pprof_profile;
struct stack_table;

/* Number of custom profiles created so far; the i-th (creation order) for
 * i below it. Async-signal-safe. Does not allocate. */
size_t custom_profile_count(void);
struct pprof_profile *custom_profile_at(size_t i);
/* The profile called name, or NULL. Not async-signal-safe. */
struct pprof_profile *custom_profile_find(const char *name);

/* A profile's name, its number of keys now, and its stacks (one counter
 * per stack: how many keys were added with it). Async-signal-safe. */
const char *custom_profile_name(const struct pprof_profile *p);
long custom_profile_keys(const struct pprof_profile *p);
struct stack_table *custom_profile_stacks(const struct pprof_profile *p);

/* 1 when name is a valid custom profile name that no built-in profile or
 * endpoint uses. Async-signal-safe. Does not allocate. */
int custom_name_allowed(const char *name);

#endif
