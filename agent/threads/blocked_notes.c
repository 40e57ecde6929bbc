/*
 * Blocked-call notes (agent/threads/blocked.h): a fixed table of slots, one per host
 * thread that entered a noting hook since noting began, found by thread id.
 *
 * Who enters: every host thread in the interposers that may block
 * (blocked_enter and blocked_leave; possibly in the host's signal
 * handlers: a few stores, one gettid the first time, no lock, no
 * allocation, errno untouched); the HTTP workers of the wall profile and
 * of the threads dump read slots (blocked_note_read); the setuid-like
 * hooks, sessions and looks turn noting on (blocked_notes_check).
 * Never: a lock, an allocation, a signal, a write to another thread's
 * slot while it owns it.
 *
 * A slot's owner word is (generation << 32 | tid): a thread claims the
 * first slot of its probe sequence that is free (0), left (tid 0) or of an
 * earlier generation (the parent's, after fork), and keeps its index in
 * its own thread-local storage; readers stop at the first never-used slot.
 * A slot is at most PROBE_MAX steps from its thread id's home.
 */
#include "agent/threads/blocked.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/guard.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SLOTS 8192 /* threads noted at once (the table is .bss: 512 KiB
                      of address space, touched only where used) */
#define PROBE_MAX 512

struct slot {
    uint64_t owner; /* generation << 32 | tid; 0 never used */
    uint32_t seq;   /* see agent/threads/blocked.h */
    long nr;
    uintptr_t fn, ret, cfa, fp;
} __attribute__((aligned(64)));

static struct slot slots[SLOTS];
static uint32_t generation = 1;
int blocked_notes_on;
void (*blocked_notes_reroute)(void);

struct mine {
    uint32_t gen;
    int32_t idx;
};
static __thread struct mine mine;

static inline uint32_t home(int tid)
{
    return ((uint32_t)tid * 2654435761u) & (SLOTS - 1);
}

/* The calling thread's slot, claimed on first use in this generation; -1
 * when none is free near its home. */
static int32_t my_slot(void)
{
    uint32_t gen = __atomic_load_n(&generation, __ATOMIC_RELAXED);
    if (mine.gen == gen)
        return mine.idx;
    int tid = (int)real_syscall(SYS_gettid);
    uint64_t want = (uint64_t)gen << 32 | (uint32_t)tid;
    for (uint32_t i = 0; i < PROBE_MAX; i++) {
        struct slot *s = &slots[(home(tid) + i) & (SLOTS - 1)];
        uint64_t o = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
        int free = o == 0 || (uint32_t)o == 0 || (o >> 32) != gen;
        if (o != want &&
            !(free && __atomic_compare_exchange_n(&s->owner, &o, want, 0,
                                                  __ATOMIC_ACQ_REL,
                                                  __ATOMIC_RELAXED)))
            continue;
        /* A fresh start: nothing open (a thread that ended inside a
         * noted call left its count at 2 mod 4). */
        uint32_t q = s->seq;
        if (q & 3)
            __atomic_store_n(&s->seq, (q + 3) & ~3u, __ATOMIC_RELEASE);
        mine.idx = (int32_t)(s - slots);
        mine.gen = gen;
        return mine.idx;
    }
    mine.idx = -1;
    mine.gen = gen;
    return -1;
}

/* Returns the token blocked_leave checks (2 mod 4), 0 when not noted. */
static uint32_t enter(long nr, uintptr_t fn, const void *frame)
{
    if (guard_active())
        return 0;
    int32_t idx = my_slot();
    if (idx < 0)
        return 0;
    struct slot *s = &slots[idx];
    uint32_t q = s->seq;
    if (q & 3) {
        /* Open: a hook in a signal handler inside a noted call (its frame
         * below the note's) leaves it alone. One whose frame is above it
         * finds a note left open by a jump out of its call (siglongjmp
         * from a handler): stale, noted anew. */
        if ((q & 3) != 2 || (uintptr_t)frame < s->cfa)
            return 0;
        q = (q + 3) & ~3u;
    }
    const uintptr_t *record = frame;
    __atomic_store_n(&s->seq, q + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    s->nr = nr;
    s->fn = fn;
    s->fp = record[0];
    s->ret = record[1];
    s->cfa = (uintptr_t)(record + 2);
    __atomic_store_n(&s->seq, q + 2, __ATOMIC_RELEASE);
    return q + 2;
}

/* The token of the calling thread's open note, so that leave closes only
 * the note its own enter opened. */
static __thread uint32_t open_token;

int blocked_enter(long nr, uintptr_t fn, const void *frame)
{
    uint32_t token = enter(nr, fn, frame);
    if (!token)
        return 0;
    open_token = token;
    return 1;
}

void blocked_leave(void)
{
    int32_t idx = mine.idx;
    if (idx < 0 || mine.gen != __atomic_load_n(&generation, __ATOMIC_RELAXED))
        return;
    struct slot *s = &slots[idx];
    uint32_t token = open_token;
    /* Not the note it opened (a handler's hook took the slot over): the
     * count is left as it is. */
    if (__atomic_load_n(&s->seq, __ATOMIC_RELAXED) == token)
        __atomic_store_n(&s->seq, token + 2, __ATOMIC_RELEASE);
}

static struct slot *find(int tid)
{
    uint64_t want =
        (uint64_t)__atomic_load_n(&generation, __ATOMIC_RELAXED) << 32 |
        (uint32_t)tid;
    for (uint32_t i = 0; i < PROBE_MAX; i++) {
        struct slot *s = &slots[(home(tid) + i) & (SLOTS - 1)];
        uint64_t o = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
        if (o == want)
            return s;
        if (o == 0)
            return NULL;
    }
    return NULL;
}

int blocked_note_read(int tid, struct blocked_note *out)
{
    struct slot *s = find(tid);
    if (!s)
        return 0;
    uint32_t q = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
    if ((q & 3) != 2)
        return 0;
    out->seq = q;
    out->nr = __atomic_load_n(&s->nr, __ATOMIC_RELAXED);
    out->fn = __atomic_load_n(&s->fn, __ATOMIC_RELAXED);
    out->ret = __atomic_load_n(&s->ret, __ATOMIC_RELAXED);
    out->cfa = __atomic_load_n(&s->cfa, __ATOMIC_RELAXED);
    out->fp = __atomic_load_n(&s->fp, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == q;
}

uint32_t blocked_note_seq(int tid)
{
    struct slot *s = find(tid);
    return s ? __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) : 0;
}

void blocked_notes_switch_on(void)
{
    __atomic_store_n(&blocked_notes_on, 1, __ATOMIC_RELEASE);
    void (*reroute)(void) =
        __atomic_load_n(&blocked_notes_reroute, __ATOMIC_ACQUIRE);
    if (reroute)
        reroute();
}

int blocked_notes_check(void)
{
    /* The raw call: the host's prctl is interposed (process/). Root
     * still reads the files it owns (a root process that said
     * PR_SET_DUMPABLE 0): nothing to note for. */
    if (!__atomic_load_n(&blocked_notes_on, __ATOMIC_RELAXED) &&
        real_syscall(SYS_prctl, PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 &&
        real_syscall(SYS_geteuid) != 0)
        blocked_notes_switch_on();
    return __atomic_load_n(&blocked_notes_on, __ATOMIC_RELAXED);
}

void blocked_thread_exiting(void)
{
    if (mine.gen != __atomic_load_n(&generation, __ATOMIC_RELAXED) ||
        mine.idx < 0)
        return;
    struct slot *s = &slots[mine.idx];
    /* Left (tid 0), not free: the probe sequences through it hold. */
    __atomic_store_n(&s->owner, (uint64_t)mine.gen << 32, __ATOMIC_RELEASE);
    mine.idx = -1;
}

FORK_PATH void blocked_notes_fork_child(void)
{
    __atomic_fetch_add(&generation, 1, __ATOMIC_RELAXED);
}
