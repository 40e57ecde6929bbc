/*
 * The threads book: the threads of a process that can no longer read
 * /proc (it chrooted, as HAProxy's worker does into an empty folder), and
 * the signals each blocks. The CPU profiler lists the threads to arm
 * (/proc/self/task) and looks at each one's mask (SigBlk) before it sends
 * anything; without /proc it found no thread and the profile was empty.
 *
 * The book is opened by the chroot hook before the real call
 * (process/confine.c), from /proc while it is still there; from then on
 * every host thread notes itself when it starts (thread_hooks.c) and
 * after each mask change (sigmask_hooks.c; under sigmask_lock on the
 * watched path, before the change counts as done on the other: the
 * protocol of agent/host/sigmask.c holds), and forgets itself when it
 * ends. proc.c reads it when /proc cannot be read. A thread created
 * without the agent's pthread_create (a raw clone) is not in it, nor is
 * a mask changed by a path no interposer sees (siglongjmp).
 *
 * A directory of /proc held open instead would have let code in the
 * process walk out of its chroot ("..") into the whole file system: the
 * agent never holds one.
 *
 * Contexts: any host thread (inside the mask interposers, possibly in a
 * signal handler: noting is async-signal-safe, a fixed table and atomic
 * operations, no lock, no allocation) and the agent's workers (reading).
 */
#include "agent/host/proc.h"
#include "agent/core/real.h"

#include "agent/log.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BOOK_SLOTS 1024

struct book_entry {
    int tid;          /* 0: free */
    uint64_t blocked; /* signals 1..64, bit sig - 1 */
};

static struct book_entry book[BOOK_SLOTS];
int proc_book_on;
/* The calling thread's slot + 1 (0: not known yet). */
static __thread int own_slot;

static uint64_t mask_bits(const sigset_t *mask)
{
    uint64_t bits = 0;
    for (int sig = 1; sig <= 64 && sig < NSIG; sig++)
        if (sigismember(mask, sig) == 1)
            bits |= 1ULL << (sig - 1);
    return bits;
}

static int find(int tid)
{
    for (int i = 0; i < BOOK_SLOTS; i++)
        if (__atomic_load_n(&book[i].tid, __ATOMIC_ACQUIRE) == tid)
            return i;
    return -1;
}

/* Claims a slot for tid; -1 when the book is full. */
static int claim(int tid)
{
    for (int i = 0; i < BOOK_SLOTS; i++) {
        int none = 0;
        if (__atomic_compare_exchange_n(&book[i].tid, &none, tid, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return i;
    }
    return -1;
}

void proc_book_note_self(const sigset_t *mask)
{
    int tid = (int)real_syscall(SYS_gettid);
    int i = own_slot - 1;
    if (i < 0 || __atomic_load_n(&book[i].tid, __ATOMIC_ACQUIRE) != tid) {
        i = find(tid);
        if (i < 0)
            i = claim(tid);
        if (i < 0)
            return;
        own_slot = i + 1;
    }
    __atomic_store_n(&book[i].blocked, mask_bits(mask), __ATOMIC_RELEASE);
}

void proc_book_forget_self(void)
{
    int tid = (int)real_syscall(SYS_gettid);
    int i = own_slot - 1;
    if (i < 0 || __atomic_load_n(&book[i].tid, __ATOMIC_ACQUIRE) != tid)
        i = find(tid);
    own_slot = 0;
    if (i >= 0)
        __atomic_store_n(&book[i].tid, 0, __ATOMIC_RELEASE);
}

/* A thread found in /proc while opening the book: added with the mask
 * /proc gives, unless it noted itself meanwhile (its note is newer). */
static int add_listed(void *arg, int tid, int dir_fd)
{
    (void)arg;
    (void)dir_fd;
    char buf[2048];
    if (find(tid) >= 0 ||
        proc_task_read(NULL, tid, "status", buf, sizeof buf) <= 0)
        return 0;
    const char *p = strstr(buf, "\nSigBlk:");
    if (!p)
        return 0;
    uint64_t bits = strtoull(p + strlen("\nSigBlk:"), NULL, 16);
    int i = claim(tid);
    if (i >= 0)
        __atomic_store_n(&book[i].blocked, bits, __ATOMIC_RELEASE);
    return 0;
}

int proc_book_open(void)
{
    if (__atomic_load_n(&proc_book_on, __ATOMIC_ACQUIRE))
        return 0;
    /* On first: a thread that starts or changes its mask from now on
     * notes itself, and the listing below adds only those that did not. */
    __atomic_store_n(&proc_book_on, 1, __ATOMIC_SEQ_CST);
    int err = proc_list("/proc/self/task", add_listed, NULL);
    if (err)
        log_debug("threads book: cannot list /proc/self/task (%s)",
                  strerror(-err));
    return err;
}

int proc_book_list(int (*fn)(void *arg, int tid, int dir_fd), void *arg)
{
    int r = 0;
    for (int i = 0; r == 0 && i < BOOK_SLOTS; i++) {
        int tid = __atomic_load_n(&book[i].tid, __ATOMIC_ACQUIRE);
        if (tid > 0)
            r = fn(arg, tid, -1);
    }
    return r;
}

int proc_book_blocked(int tid, uint64_t *blocked)
{
    int i = find(tid);
    if (i < 0)
        return -ENOENT;
    *blocked = __atomic_load_n(&book[i].blocked, __ATOMIC_ACQUIRE);
    return 0;
}

void proc_book_fork_child(const sigset_t *mask)
{
    /* The parent's threads did not come along: the child's only thread
     * is the book's only entry. */
    if (!__atomic_load_n(&proc_book_on, __ATOMIC_RELAXED))
        return;
    for (int i = 0; i < BOOK_SLOTS; i++)
        __atomic_store_n(&book[i].tid, 0, __ATOMIC_RELAXED);
    own_slot = 0;
    proc_book_note_self(mask);
}
