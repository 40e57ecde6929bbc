/*
 * The doors an attach binds (docs/attach.md): the names whose calls feed
 * the heap, allocs, mutex and block profiles and the threads' stacks,
 * each with the agent's own
 * definition and the C library's one it forwards to. attach_relocs.c
 * points the loaded objects' relocations of these names from the second
 * to the first.
 *
 * The agent's definition is read through a handle on the agent itself:
 * loaded by dlopen without RTLD_GLOBAL, the agent's own references to
 * malloc bind the C library's, so &malloc here would not be the door.
 * The C library's is next_symbol()'s answer, the function the door
 * forwards to; a relocation is rewritten only when it leads there.
 *
 * Entered on the starter of an attached agent, with the guard entered;
 * never in signal context.
 */
#include "process/process.h"

#include "agent/core/loader.h"
#include "agent/core/next_symbol.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

/* docs/doors.md: the malloc family (agent/heap/malloc_hooks.c), the
 * waits of agent/locks/lock_hooks.c and wait_hooks.c, and thread creation
 * (agent/threads/thread_hooks.c: a thread started through it has its
 * stack bounds known, its name and end seen). The door stays callable
 * after a detach: a host that kept its address still creates threads
 * through it. */
static const char *const door_names[] = {
    "malloc", "free", "calloc", "realloc", "reallocarray",
    "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
    "malloc_usable_size",
    "pthread_mutex_lock", "pthread_mutex_trylock", "pthread_mutex_timedlock",
    "pthread_mutex_unlock", "pthread_rwlock_rdlock", "pthread_rwlock_wrlock",
    "pthread_rwlock_timedrdlock", "pthread_rwlock_timedwrlock",
    "pthread_rwlock_unlock", "pthread_cond_wait", "pthread_cond_timedwait",
    "sem_wait", "sem_timedwait",
    "pthread_mutex_clocklock", "pthread_rwlock_clockrdlock",
    "pthread_rwlock_clockwrlock", "pthread_cond_clockwait", "sem_clockwait",
    "pthread_barrier_wait", "pthread_join", "pthread_timedjoin_np",
    "pthread_clockjoin_np", "pthread_spin_lock", "pthread_create",
};
#define DOORS_MAX (sizeof door_names / sizeof door_names[0])

/* Written by attach_doors_init() before any reader, on the starter. */
static struct attach_door doors[DOORS_MAX];
static int ndoors;

int attach_doors_init(void)
{
    Dl_info info;
    if (!loader_addr((const void *)attach_doors_init, &info) ||
        !info.dli_fname)
        return -ENOENT;
    /* Never closed: the agent is linked nodelete. */
    void *self = loader_open(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!self)
        return -ENOENT;
    ndoors = 0;
    for (size_t i = 0; i < DOORS_MAX; i++) {
        void *mine = loader_sym(self, door_names[i]);
        void *real = next_symbol(door_names[i]);
        if (!mine || !real || mine == real)
            continue;
        doors[ndoors++] = (struct attach_door){
            door_names[i], (uintptr_t)mine, (uintptr_t)real};
    }
    return ndoors ? 0 : -ENOENT;
}

int attach_door_find(const char *name)
{
    /* Every door's name begins with one of these: most relocations are
     * told apart by their first letters. */
    if (name[0] != 'm' && name[0] != 'f' && name[0] != 'c' &&
        name[0] != 'r' && name[0] != 'p' && name[0] != 'a' &&
        name[0] != 'v' && name[0] != 's')
        return -1;
    for (int i = 0; i < ndoors; i++)
        if (strcmp(doors[i].name, name) == 0)
            return i;
    return -1;
}

const struct attach_door *attach_door(int i)
{
    return &doors[i];
}
