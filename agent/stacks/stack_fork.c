/*
 * The stack walker across fork. Walks take no lock, so a fork never leaves
 * the child waiting on one; what the child must forget is the parent's
 * other threads registered as readers of the unwind tables (a refresh in
 * the child would wait for them for ever) and the program-header
 * snapshot's readers.
 */
#include "agent/agent.h"
#include "agent/cfi.h"
#include "agent/cpu.h"

#include <pthread.h>

static void fork_child(void)
{
    /* Only the forking thread came along. */
    phdr_cache_fork_child();
    cfi_tables_fork_child();
}

void stack_fork_init(void)
{
    pthread_atfork(NULL, NULL, fork_child);
}
