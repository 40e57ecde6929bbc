/*
 * Which futex wakes are lock releases. At the system call a lock's release
 * and a condition's signal are the same FUTEX_WAKE; Go's mutex profile has
 * only the first (a sync.Cond's or a channel's waits reach the block profile
 * alone). The waker's own functions say which it was: the innermost frame
 * that names a lock or a condition decides (docs/contention.md lists the
 * names and why the innermost one). Runs on the agent's server threads,
 * while a mutex profile is written; takes the symbolizer's lock.
 */
#include "encoder/encoder.h"

#include "agent/symbols/symbols.h"

#include <string.h>

/* Names of conditions, notifications and one-time events: a wake from one
 * of these ends a wait that no lock holder caused. Checked before the lock
 * names within one frame (a condition's functions often name its mutex,
 * e.g. in generic arguments). Thread parkers are neither: parking_lot
 * releases its mutexes through them, so the next frame out decides. */
static const char *const condition_names[] = {
    "Condvar", "condvar", "cond_", "_cond", "Condition", "condition",
    "notify", "Notify", "::once::", "OnceLock", "OnceCell", "once_cell",
    "std::call_once", "pthread_once", "Barrier", "barrier", "Latch", "latch",
    "emaphore", "sem_post", "mpsc", "mpmc", "crossbeam_channel",
};

static const char *const lock_names[] = {
    "Mutex", "mutex", "RwLock", "rwlock", "RWLock", "SharedLock", "unlock",
    "Unlock", "SpinLock", "spinlock", "lock_slow", "LockPi", "lock_pi",
};

/* Only the waker's innermost frames are read: the lock or condition code
 * that issued the wake sits there, and the outer frames (the program's
 * main loop, the runtime's thread start) are nobody's release. */
#define WAKE_FRAMES 6

static int names_any(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(name, list[i]))
            return 1;
    return 0;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* 1: lock, 0: condition, -1: this name says neither. */
static int name_kind(const char *name)
{
    if (!name)
        return -1;
    if (names_any(name, condition_names, COUNT(condition_names)))
        return 0;
    if (names_any(name, lock_names, COUNT(lock_names)))
        return 1;
    return -1;
}

int contention_wake_is_lock(const uintptr_t *pcs, int depth)
{
    int kind = -1;
    symbols_lock();
    symbols_refresh();
    for (int i = 0; i < depth && i < WAKE_FRAMES && kind < 0; i++) {
        if (symbols_pseudo_name(pcs[i]))
            continue;
        struct sym_frame frames[8];
        int n = symbols_resolve(pcs[i], frames, 8);
        for (int k = 0; k < n && kind < 0; k++) {
            kind = name_kind(frames[k].name);
            if (kind < 0)
                kind = name_kind(frames[k].system_name);
        }
    }
    symbols_unlock();
    /* Nothing named either (a hand-written lock in a stripped program):
     * most futex users are locks, and a condition charged here still shows
     * the waker's stack. */
    return kind != 0;
}
