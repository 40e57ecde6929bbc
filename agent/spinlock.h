/* The spinlock for the agent's tables (core/guard.c). */

#ifndef PPROF_AGENT_SPINLOCK_H
#define PPROF_AGENT_SPINLOCK_H

/* The agent never uses the host's (interposed) pthread mutexes for its own
 * tables: a spinlock that yields is enough for the short insert paths. */
typedef struct {
    int locked; /* the holder's thread id; 0 when free */
} spinlock_t;
/* Takes l; a lock whose holder is not a thread of this process (held in
 * the parent at fork time) is taken over (guard.c). Not async-signal-safe.
 * Does not allocate. */
void spin_lock(spinlock_t *l);
static inline void spin_unlock(spinlock_t *l)
{
    __atomic_store_n(&l->locked, 0, __ATOMIC_RELEASE);
}

#endif
