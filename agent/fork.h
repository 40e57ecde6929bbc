/* Fork (agent/fork.c): the one ordered list of fork handlers. */

#ifndef PPROF_AGENT_FORK_H
#define PPROF_AGENT_FORK_H

/* Registers the agent's fork handlers (the first call) and turns them
 * on: the modules' steps, and the process shell's
 * (shell_prepare runs first of the prepare steps, shell_child after the
 * agent's own child steps; shell_after in the child once every fork
 * handler of the host ran too: see fork.c; any may be NULL). Called by the
 * constructor, and by each attach. Not async-signal-safe. */
void fork_init(void (*shell_prepare)(void), void (*shell_child)(void),
               void (*shell_after)(void));

#endif
