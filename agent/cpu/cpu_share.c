/*
 * One CPU profile, two readers: the session's owner (whoever started it)
 * and one guest that joined it. The push (process/push.c) keeps a profile
 * running all the time and lets a guest in, so that a request for
 * /debug/pprof/profile meanwhile gets the same samples for its window
 * instead of "already in use"; the push itself joins a profile an HTTP
 * request or the dumps started, and starts its own once that ends. A
 * second request still gets Go's 500: one guest at a time, and a session
 * an HTTP request owns lets in only the push.
 *
 * The owner's drains pass every sample to the guest too (cpu_share_drain,
 * from cpu_timer.c), under share_lock; leaving takes that lock, so a guest
 * that left reads its samples alone. Runs on the agent's own threads only;
 * never in a signal handler.
 */
#include "agent/cpu/cpu.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include <errno.h>
#include <pthread.h>

static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;
/* Under share_lock. */
static cpu_sample_fn guest_fn FORK_STATE;
static void *guest_arg FORK_STATE;
static int owner_shares FORK_STATE;
/* Threads between the start of share_take() and the end of share_give():
 * 0 in a fork child means share_lock is free there and nothing of the
 * parent's share is left, known by a read of the fork-state page. */
static int share_users FORK_STATE;

static void share_take(void)
{
    __atomic_add_fetch(&share_users, 1, __ATOMIC_SEQ_CST);
    real_pthread_mutex_lock(&share_lock);
}

static void share_give(void)
{
    real_pthread_mutex_unlock(&share_lock);
    __atomic_sub_fetch(&share_users, 1, __ATOMIC_SEQ_CST);
}

struct tee {
    cpu_sample_fn fn;
    void *arg;
};

static void tee(const struct cpu_sample *s, void *p)
{
    const struct tee *t = p;
    if (t->fn)
        t->fn(s, t->arg);
    if (guest_fn)
        guest_fn(s, guest_arg);
}

void cpu_share_drain(cpu_sample_fn fn, void *arg)
{
    struct tee t = {fn, arg};
    share_take();
    cpu_ringbuf_drain(tee, &t);
    share_give();
}

void cpu_share_emit(cpu_sample_fn fn, void *arg, const struct cpu_sample *s)
{
    struct tee t = {fn, arg};
    share_take();
    tee(s, &t);
    share_give();
}

void cpu_share_end(void)
{
    share_take();
    guest_fn = NULL;
    guest_arg = NULL;
    owner_shares = 0;
    share_give();
}

void cpu_profile_share(void)
{
    share_take();
    owner_shares = 1;
    share_give();
}

int cpu_profile_join(cpu_sample_fn fn, void *arg, int any_owner)
{
    share_take();
    int ok = __atomic_load_n(&cpu_active, __ATOMIC_SEQ_CST) && !guest_fn &&
             (owner_shares || any_owner);
    if (ok) {
        guest_fn = fn;
        guest_arg = arg;
    }
    share_give();
    return ok ? 0 : -EBUSY;
}

int cpu_profile_joined(const void *arg)
{
    share_take();
    int yes = guest_fn && guest_arg == arg;
    share_give();
    return yes;
}

void cpu_profile_leave(const void *arg)
{
    share_take();
    if (guest_arg == arg) {
        guest_fn = NULL;
        guest_arg = NULL;
    }
    share_give();
}

FORK_PATH void cpu_share_fork_child(void)
{
    if (__atomic_load_n(&share_users, __ATOMIC_SEQ_CST) == 0 && !guest_fn &&
        !owner_shares)
        return;
    share_users = 0;
    /* On the stack: read-only data would be a page more to fault in. */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    fork_reset(&share_lock, &fresh, sizeof share_lock);
    FORK_SET(guest_fn, NULL);
    FORK_SET(guest_arg, NULL);
    FORK_SET(owner_shares, 0);
}
