/*
 * Go's execution-trace wire format (encoder/trace_wire.c): tables and
 * events in, the bytes of a one-generation trace out. Used by
 * encoder/trace.c only.
 */
#ifndef PPROF_TRACE_WIRE_H
#define PPROF_TRACE_WIRE_H

#include "agent/core/hash.h"
#include "encoder/encoder.h"

#include <stddef.h>
#include <stdint.h>

/* Event types the model writes (tracev2.EventType values). */
enum {
    TW_PROC_STOP = 11,
    TW_PROC_STATUS = 13,
    TW_GO_CREATE = 14,
    TW_GO_START = 16,
    TW_GO_DESTROY = 17,
    TW_GO_BLOCK = 20,
    TW_GO_UNBLOCK = 21,
    TW_GO_SYSCALL_BEGIN = 22,
    TW_GO_SYSCALL_END = 23,
    TW_GO_LABEL = 39,
    TW_USER_TASK_BEGIN = 40,
    TW_USER_TASK_END = 41,
    TW_USER_REGION_BEGIN = 42,
    TW_USER_REGION_END = 43,
    TW_USER_LOG = 44,
    TW_GO_STATUS_STACK = 48,
};
/* Statuses of a P (tracev2.ProcStatus). */
enum {
    TW_PROC_RUNNING = 1,
    TW_PROC_SYSCALL = 3,
};
/* Statuses of a goroutine (tracev2.GoStatus). */
enum {
    TW_GO_RUNNING = 2,
    TW_GO_SYSCALL = 3,
    TW_GO_WAITING = 4,
};

struct tw_str {
    char *s;
    size_t len;
};
struct tw_pc {
    uintptr_t pc;
    uint64_t func, file, line; /* string ids, line */
};
struct tw_stack {
    size_t first, n;
    const uintptr_t *pcs; /* a key being looked up only */
};
struct tw_ev {
    int64_t t;
    uint32_t m;   /* index into thread_ids */
    uint32_t ord; /* order of writing, for equal times */
    uint8_t type, nargs;
    uint64_t args[5]; /* after the time delta */
};
struct tw_cpu {
    int64_t t;
    uint64_t m, p, g, stack;
};

struct tw {
    int64_t t0;           /* the sync batch's time: the window's start */
    uint64_t *thread_ids; /* M ids by index (the caller fills) */
    struct tw_str *strs;
    size_t nstrs, strs_cap;
    struct htab str_index;
    struct tw_pc *pcs;
    size_t npcs, pcs_cap;
    struct htab pc_index;
    struct tw_stack *stacks;
    size_t nstacks, stacks_cap;
    uintptr_t *frames;
    size_t nframes, frames_cap;
    struct htab stack_index;
    struct tw_ev *evs;
    size_t nevs, evs_cap;
    struct tw_cpu *cpu;
    size_t ncpu, cpu_cap;
    struct pbuf out;
    int oom;
};

/* String id of s (interned, from 1). */
uint64_t tw_string(struct tw *w, const char *s, size_t len);
/* Stack id of pcs, leaf first (interned, from 1; 0 for no stack). */
uint64_t tw_stack(struct tw *w, const uintptr_t *pcs, size_t n);
/* Gives the made-up program counter pc the function name name. */
void tw_name_frame(struct tw *w, uintptr_t pc, const char *name);
/* An event of thread index m at time t (ns) with its arguments. */
void tw_event(struct tw *w, uint32_t m, int64_t t, int type, int nargs,
              const uint64_t *args);
/* A CPU sample. */
void tw_cpu_sample(struct tw *w, int64_t t, uint64_t m, uint64_t p,
                   uint64_t g, uint64_t stack);
/* Symbolizes and writes the trace into *out (the caller frees it).
 * Returns 0, or -1 when memory ran out. */
int tw_finish(struct tw *w, struct pbuf *out);
void tw_free(struct tw *w);

#endif
