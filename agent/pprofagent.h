/*
 * pprofagent.h: the public API of libpprofagent.so, for C and C++.
 *
 * Everything here is optional. The agent's functions are declared weak, and
 * every function of this header is a small inline wrapper that checks that
 * the agent is loaded before calling it: a program built against this
 * header and started without the agent (no LD_PRELOAD) runs exactly the
 * same, its calls do nothing and return the documented "absent" value.
 * Nothing needs to be linked: the agent provides the symbols at run time.
 *
 * Custom profiles, as Go's pprof.NewProfile:
 *
 *     static pprof_profile *blobs;
 *     blobs = pprof_profile_new("example.com/blobs");
 *     pprof_profile_add(blobs, handle, 0);    // records the caller's stack
 *     pprof_profile_remove(blobs, handle);
 *
 * served at /debug/pprof/example.com/blobs (proto, or text with debug=1)
 * and listed on the /debug/pprof/ index with its count.
 *
 * Labels, as Go's pprof.Do / SetGoroutineLabels: key=value pairs attached
 * to the calling thread. CPU and heap samples taken while they are set, and
 * the thread's entry in /debug/pprof/goroutine, carry them, so that
 * `go tool pprof -tagfocus=endpoint=/api` selects them. A thread starts
 * with the labels of the thread that created it.
 *
 *     pprof_labels saved = pprof_labels_save();
 *     pprof_label_set("endpoint", "/api");
 *     handle_request();
 *     pprof_labels_restore(saved);
 *
 * Threads: every function may be called from any thread. None may be
 * called from a signal handler, except pprof_labels_save() and
 * pprof_labels_restore(), which only swap a thread-local pointer.
 */
#ifndef PPROFAGENT_H
#define PPROFAGENT_H

#include <errno.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A custom profile; never freed, as Go's. */
typedef struct pprof_profile pprof_profile;

/* A thread's label set, as saved by pprof_labels_save(): an immutable
 * value, valid for the life of the process. NULL is the empty set. */
typedef const struct pprof_label_set *pprof_labels;

/* ---- the agent's entry points (weak: NULL when the agent is absent) ------
 * Call the inline wrappers below rather than these. Errors are -errno. */
#ifdef PPROF_AGENT_BUILD /* inside the agent: the definitions, exported */
#define PPROF_WEAK __attribute__((visibility("default")))
#else
#define PPROF_WEAK __attribute__((weak))
#endif
/* Keys are identities, never read: tell GCC so (no "may be used
 * uninitialized" for a key that points to fresh memory). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#define PPROF_KEY_UNREAD __attribute__((access(none, 2)))
#else
#define PPROF_KEY_UNREAD
#endif
extern int pprof_agent_api_version(void) PPROF_WEAK;
extern pprof_profile *pprof_agent_profile_new(const char *name) PPROF_WEAK;
extern pprof_profile *pprof_agent_profile_lookup(const char *name) PPROF_WEAK;
extern int pprof_agent_profile_add(pprof_profile *p, const void *key,
                                   int skip) PPROF_WEAK PPROF_KEY_UNREAD;
extern int pprof_agent_profile_remove(pprof_profile *p,
                                      const void *key) PPROF_WEAK
    PPROF_KEY_UNREAD;
extern long pprof_agent_profile_count(pprof_profile *p) PPROF_WEAK;
extern int pprof_agent_label_set(const char *key,
                                 const char *value) PPROF_WEAK;
extern int pprof_agent_label_clear(const char *key) PPROF_WEAK;
extern pprof_labels pprof_agent_labels_save(void) PPROF_WEAK;
extern void pprof_agent_labels_restore(pprof_labels labels) PPROF_WEAK;
extern unsigned long long pprof_agent_trace_task_begin(unsigned long long parent,
                                                       const char *type)
    PPROF_WEAK;
extern void pprof_agent_trace_task_end(unsigned long long task) PPROF_WEAK;
extern void pprof_agent_trace_region(unsigned long long task,
                                     const char *type, int end) PPROF_WEAK;
extern void pprof_agent_trace_log(unsigned long long task,
                                  const char *category,
                                  const char *message) PPROF_WEAK;
extern int pprof_agent_trace_enabled(void) PPROF_WEAK;
#undef PPROF_WEAK
#undef PPROF_KEY_UNREAD

#ifndef PPROF_AGENT_BUILD /* the agent itself needs no wrappers */

/* The wrappers are always inlined; pprof_profile_add() is a macro, so that
 * no frame of the header (not even an inlined one in the debug info) comes
 * between the caller and the stack the agent records. */
#define PPROF_INLINE static inline __attribute__((always_inline, unused))

/* 1 when the agent is loaded (and its API answers), 0 otherwise. */
PPROF_INLINE int pprof_agent_loaded(void)
{
    return pprof_agent_api_version != 0 && pprof_agent_api_version() >= 1;
}

/* ---- custom profiles ------------------------------------------------------ */

/*
 * Creates the profile called name, served at /debug/pprof/<name>. A name is
 * 1 to 128 characters among letters, digits and . _ - / + (not starting or
 * ending with /). Returns NULL, with errno set, when the agent is absent or
 * disabled (ENOSYS), the name is invalid or belongs to an endpoint of the
 * agent (goroutine, heap, allocs, threadcreate, block, mutex, profile,
 * cmdline, symbol, trace, flamegraph, processes) (EINVAL), already exists
 * (EEXIST; see pprof_profile_lookup), or 64 custom profiles exist (ENOSPC).
 */
PPROF_INLINE pprof_profile *pprof_profile_new(const char *name)
{
    if (!pprof_agent_profile_new) {
        errno = ENOSYS;
        return 0;
    }
    return pprof_agent_profile_new(name);
}

/* The existing custom profile called name, or NULL. */
PPROF_INLINE pprof_profile *pprof_profile_lookup(const char *name)
{
    return pprof_agent_profile_lookup ? pprof_agent_profile_lookup(name) : 0;
}

/*
 * Adds key (any pointer-sized identity: a handle, an object's address) to
 * p, with the stack of the caller of pprof_profile_add(), leaving out skip
 * more frames (skip = 1: the caller's caller). Returns 0, or -EEXIST when
 * key is already in p (Go panics there), -EINVAL when p is NULL, -ENOMEM.
 * Returns 0 and does nothing when the agent is absent.
 */
#define pprof_profile_add(p, key, skip)                                        \
    (pprof_agent_profile_add ? pprof_agent_profile_add((p), (key), (skip)) : 0)

/* Removes key from p. Returns 0, or -ENOENT when key is not in p (Go
 * ignores it; so may the caller). Returns 0 when the agent is absent. */
PPROF_INLINE int pprof_profile_remove(pprof_profile *p, const void *key)
{
    return pprof_agent_profile_remove ? pprof_agent_profile_remove(p, key) : 0;
}

/* Number of keys in p now; 0 when the agent is absent or p is NULL. */
PPROF_INLINE long pprof_profile_count(pprof_profile *p)
{
    return pprof_agent_profile_count ? pprof_agent_profile_count(p) : 0;
}

/* ---- labels ---------------------------------------------------------------- */

/*
 * Sets key=value on the calling thread (replacing the value of key).
 * Keys and values are copied; each is 1 to 255 bytes. Returns 0, -EINVAL
 * (bad key or value), -E2BIG (more than 32 labels on one thread), -ENOSPC
 * (65536 distinct label sets exist: label sets are kept for the life of
 * the process, so values must come from a small set, such as endpoints or
 * request types, never ids). Returns 0 when the agent is absent.
 */
PPROF_INLINE int pprof_label_set(const char *key, const char *value)
{
    return pprof_agent_label_set ? pprof_agent_label_set(key, value) : 0;
}

/* Removes key from the calling thread's labels. Returns 0, -EINVAL.
 * Returns 0 when the agent is absent. */
PPROF_INLINE int pprof_label_clear(const char *key)
{
    return pprof_agent_label_clear ? pprof_agent_label_clear(key) : 0;
}

/* The calling thread's current label set (NULL: none), to restore later.
 * Async-signal-safe. */
PPROF_INLINE pprof_labels pprof_labels_save(void)
{
    return pprof_agent_labels_save ? pprof_agent_labels_save() : 0;
}

/* Makes labels (from pprof_labels_save(), on any thread; NULL clears all)
 * the calling thread's label set. Async-signal-safe. */
PPROF_INLINE void pprof_labels_restore(pprof_labels labels)
{
    if (pprof_agent_labels_restore)
        pprof_agent_labels_restore(labels);
}

/* Removes every label of the calling thread. */
PPROF_INLINE void pprof_labels_clear_all(void)
{
    pprof_labels_restore(0);
}

/* ---- execution trace annotations ------------------------------------------ */

/*
 * As Go's runtime/trace: a task is a logical operation (a request) that
 * may span threads; a region is a stretch of one thread's time inside a
 * task; a log message is attached to a task. They show in `go tool
 * trace`'s "User-defined tasks" and "User-defined regions" views of a
 * trace taken from /debug/pprof/trace, with the caller's stack.
 *
 *     pprof_task t = pprof_trace_task_begin(0, "request");
 *     pprof_trace_region_begin(t, "parse");
 *     ...
 *     pprof_trace_region_end(t, "parse");
 *     pprof_trace_log(t, "user", "alice");
 *     pprof_trace_task_end(t);
 *
 * A task id (never 0; 0 is the background task, "no task") is handed out
 * whether or not a trace runs, so that a task begun before a trace can end
 * inside it. Regions must nest on their thread, each ended with the same
 * task and type it began with. Strings are copied (at most 256 bytes).
 * With no trace running each call is a test and a return; without the
 * agent, nothing (task ids are then 0).
 */
typedef unsigned long long pprof_task;

PPROF_INLINE pprof_task pprof_trace_task_begin(pprof_task parent,
                                               const char *type)
{
    return pprof_agent_trace_task_begin
               ? pprof_agent_trace_task_begin(parent, type)
               : 0;
}

PPROF_INLINE void pprof_trace_task_end(pprof_task task)
{
    if (pprof_agent_trace_task_end)
        pprof_agent_trace_task_end(task);
}

PPROF_INLINE void pprof_trace_region_begin(pprof_task task, const char *type)
{
    if (pprof_agent_trace_region)
        pprof_agent_trace_region(task, type, 0);
}

PPROF_INLINE void pprof_trace_region_end(pprof_task task, const char *type)
{
    if (pprof_agent_trace_region)
        pprof_agent_trace_region(task, type, 1);
}

PPROF_INLINE void pprof_trace_log(pprof_task task, const char *category,
                                  const char *message)
{
    if (pprof_agent_trace_log)
        pprof_agent_trace_log(task, category, message);
}

/* 1 while a trace records (Go's trace.IsEnabled), else 0. */
PPROF_INLINE int pprof_trace_enabled(void)
{
    return pprof_agent_trace_enabled ? pprof_agent_trace_enabled() : 0;
}

#undef PPROF_INLINE
#endif /* PPROF_AGENT_BUILD */

#ifdef __cplusplus
}
#endif

#endif
