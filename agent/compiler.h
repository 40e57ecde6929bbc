/*
 * What every file of agent/ may use: the branch hints, and the marker of
 * code that runs in signal context.
 *
 * Contexts: interposed calls run on the host's threads (hot paths: never
 * block, never allocate through the hooks, never log in a loop); signal
 * handlers run anywhere (only functions marked Async-signal-safe); the
 * agent's own threads (HTTP workers) keep the reentrancy flag set so every
 * call they make goes straight to the real C library.
 */

#ifndef PPROF_AGENT_COMPILER_H
#define PPROF_AGENT_COMPILER_H

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Code that runs once, when the agent loads (what the constructors call):
 * the compiler keeps it together at the start of the agent's code, beside
 * the constructors themselves, so that loading touches few pages of code.
 * Every process the agent is preloaded into pays each page as a fault,
 * and most exec'd processes (a build's compilers, shells, touch) do
 * nothing else with the agent. */
#define STARTUP __attribute__((cold))

/* Code that nearly every process or forked child runs after its start,
 * the agent on or off: the doors most programs call (the allocator's,
 * close, dup2, the mask calls, the blocking calls' jumps) and the exit
 * path. Kept beside the loading code and the fork steps
 * (agent/fork_step.h: the linker gathers .text.hot.*), where the page
 * faults that map those (64 KiB at a time) map these too: a forked
 * child's first calls found their code unmapped in the child, a fault
 * each (perf record -e page-faults -d). */
#define COMMON_PATH __attribute__((section(".text.hot.pprof_common")))

/* A variable that the constructor writes in every process, a pass-through
 * exec'd descendant's included: kept in a section of its own, which the
 * link puts after the initialized data, on the last page of the data the
 * loader writes anyway (relocations, and the zeros it puts after the data
 * on that page). In the zeroed data instead, its page would be one more
 * fault in each of a build's processes. Only what fits in the rest of
 * that page (0xc80 bytes of its 0xde0 free when this was written; one
 * that spilled onto the next page would cost a fault, not a failure:
 * test/bench/README.md, short_lived), marked at the definition:
 * `static const char *x[64] LOAD_STATE;`. */
#define LOAD_STATE __attribute__((section("pprof_load_state")))

/* Marks code that runs in signal context; see the file comments. */
#define PPROF_SIGNAL_SAFE

#endif
