/*
 * The push's two threads (process/push.h), both the agent's own (every
 * signal blocked, never sampled):
 *
 * - the collector wakes once a second to move the CPU profile's samples
 *   out of its buffer, and at each interval's end turns the window into
 *   one request (push_collect.c) and queues it. It never waits for the
 *   network, so a slow collector costs no samples.
 * - the sender takes the oldest request and posts it (push_http.c). An
 *   answer of 2xx counts it sent. A collector that is down, resets, times
 *   out or answers 429, 502, 503 or 504 (the retryable answers of the
 *   OTLP specification) gets the same request again later: after 1, 2,
 *   4... seconds (at most 60), each drawn in [half, whole] (jitter, so
 *   that a fleet does not come back in step), or after Retry-After when
 *   it said so (at most 300); after PUSH_TRIES_MAX tries the request is
 *   dropped. Any other answer (400, 401, 413...) drops it at once: it
 *   would be refused again. Each change between working and failing is
 *   said in one line.
 *
 * The queue holds PUSH_QUEUE_MAX requests; when the collector keeps
 * failing, the oldest is dropped for the newest. Drops are counted (the
 * index page and /debug/stats show them) with everything else in
 * push_counters.
 *
 * Fork: a forked child's push is its own, started by its deferred start
 * (children.c, start.c) unless PPROF_CHILDREN=off; the parent's threads
 * and queue stay the parent's (push_fork_child only forgets them).
 *
 * Exit: exit() (or return from main) runs push_at_exit on the host's
 * thread, which only flips a flag and waits, at most PUSH_EXIT_MS, while
 * the collector makes the last window's request and the sender posts what
 * is queued within that time. _exit and fatal signals send nothing.
 *
 * Attach (process/attach.c): the threads are joinable, and the detach
 * ends them as the exit would (push_stop): the last window is sent within
 * PUSH_EXIT_MS, both threads are joined and the state is set back for a
 * later attach, with that attach's settings.
 */
#include "process/push.h"
#include "agent/core/real.h"
#include "agent/fork_step.h"

#include "agent/core/clock.h"
#include "agent/cpu/cpu.h"
#include "agent/guard.h"
#include "agent/log.h"
#include "agent/core/push.h"
#include "process/process.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake; /* CLOCK_MONOTONIC; collector, sender, exit */

/* Under lock. */
struct item {
    struct pbuf req;
    int tries;
};
static struct item queue[PUSH_QUEUE_MAX];
static size_t qhead, qlen;
/* Set before the push's threads start: 0 means none of the state below
 * was ever written (a fork child has nothing to reset). */
static int started FORK_STATE;
static int exiting, collector_done, sender_done;
static int64_t retry_at; /* monotonic ns; 0: now */
static int64_t exit_deadline; /* monotonic ns, once exiting */
static int exit_registered;
/* An attached agent's threads, joined by push_stop. */
static int joinable;
static pthread_t collector_tid, sender_tid;
/* The working or failing state said last (say). */
static int failing;

static void count_queue(void)
{
    __atomic_store_n(&push_counters.queued, (uint64_t)qlen,
                     __ATOMIC_RELAXED);
}

static void wait_until(int64_t when)
{
    struct timespec ts = {when / 1000000000, when % 1000000000};
    real_pthread_cond_timedwait(&wake, &lock, &ts);
}

static void drop(struct item *it)
{
    pbuf_free(&it->req);
    __atomic_fetch_add(&push_counters.dropped, 1, __ATOMIC_RELAXED);
}

/* Puts a request at the tail (new) or back at the head (a retry); when
 * full, the oldest goes. Under lock. */
static void enqueue(struct item *it, int at_head)
{
    if (qlen == PUSH_QUEUE_MAX) {
        if (at_head) {
            drop(it); /* it is the oldest */
            return;
        }
        drop(&queue[qhead]);
        qhead = (qhead + 1) % PUSH_QUEUE_MAX;
        qlen--;
    }
    if (at_head) {
        qhead = (qhead + PUSH_QUEUE_MAX - 1) % PUSH_QUEUE_MAX;
        queue[qhead] = *it;
    } else {
        queue[(qhead + qlen) % PUSH_QUEUE_MAX] = *it;
    }
    qlen++;
    count_queue();
    pthread_cond_broadcast(&wake);
}

/* ---- the collector ---------------------------------------------------------- */

static void collect(int final)
{
    struct item it = {{0}, 0};
    int err = push_collect_interval(final, &it.req);
    __atomic_fetch_add(&push_counters.intervals, 1, __ATOMIC_RELAXED);
    real_pthread_mutex_lock(&lock);
    if (err == 0 && !it.req.oom)
        enqueue(&it, 0);
    else
        drop(&it);
    real_pthread_mutex_unlock(&lock);
}

SHELL_THREAD_MAIN(collector, "pprofagent-push")
static void *collector_body(void *unused)
{
    (void)unused;
    push_collect_start();
    int64_t period = opt_push.interval_s * 1000000000LL;
    int64_t next = push_mono_ns() + period;
    for (;;) {
        int64_t now = push_mono_ns();
        int64_t until = now + 1000000000LL < next ? now + 1000000000LL : next;
        real_pthread_mutex_lock(&lock);
        if (!exiting)
            wait_until(until);
        int final = exiting;
        real_pthread_mutex_unlock(&lock);
        push_collect_tick();
        if (final) {
            collect(1);
            real_pthread_mutex_lock(&lock);
            collector_done = 1;
            pthread_cond_broadcast(&wake);
            real_pthread_mutex_unlock(&lock);
            return NULL;
        }
        now = push_mono_ns();
        if (now >= next) {
            collect(0);
            next += period;
            if (next <= now)
                next = now + period;
        }
    }
}

/* ---- the sender ----------------------------------------------------------------- */

static int64_t random_between(int64_t lo, int64_t hi)
{
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = hash_splitmix64((uint64_t)push_mono_ns());
    return lo + (int64_t)(r % (uint64_t)(hi - lo + 1));
}

/* When to try again after `tries` failed tries (Retry-After: ra s). */
static int64_t backoff_ns(int tries, long ra)
{
    if (ra >= 0)
        return (ra > 300 ? 300 : ra) * 1000000000LL;
    int64_t whole = 1000000000LL << (tries > 7 ? 6 : tries - 1);
    if (whole > 60000000000LL)
        whole = 60000000000LL;
    return random_between(whole / 2, whole);
}

static int retryable(int err, int status)
{
    return err != 0 || status == 429 || status == 502 || status == 503 ||
           status == 504;
}

/* Says the change between working and failing, once each way. */
static void say(int ok, int err, const struct push_answer *a, int again)
{
    char what[128];
    if (err)
        log_snprintf(what, sizeof what, "%s", log_errtext(-err));
    else
        log_snprintf(what, sizeof what, "HTTP %d %s", a->status, a->why);
    if (!ok)
        log_snprintf(push_counters.last_error,
                     sizeof push_counters.last_error, "%s", what);
    if (ok && failing)
        log_info("push: %s accepts profiles again", opt_push.url);
    else if (!ok && !failing && again)
        log_info("push: %s: %s; retrying, the oldest of %d intervals "
                 "dropped when more wait",
                 opt_push.url, what, PUSH_QUEUE_MAX);
    else if (!ok && !failing)
        log_info("push: %s: %s; that interval is dropped", opt_push.url,
                 what);
    failing = !ok;
}

static void send_one(struct item *it)
{
    struct push_answer a;
    __atomic_fetch_add(&push_counters.attempts, 1, __ATOMIC_RELAXED);
    if (it->tries > 0)
        __atomic_fetch_add(&push_counters.retries, 1, __ATOMIC_RELAXED);
    real_pthread_mutex_lock(&lock);
    int64_t deadline = push_mono_ns() + opt_push.timeout_ms * 1000000LL;
    int at_exit = exiting;
    if (at_exit && deadline > exit_deadline)
        deadline = exit_deadline;
    real_pthread_mutex_unlock(&lock);
    int err = push_http_post(&it->req, deadline, &a);
    it->tries++;
    push_counters.last_status = err ? 0 : a.status;
    int ok = !err && a.status >= 200 && a.status < 300;
    say(ok, err, &a, retryable(err, a.status));
    real_pthread_mutex_lock(&lock);
    if (ok) {
        __atomic_fetch_add(&push_counters.sent, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&push_counters.bytes, it->req.len,
                           __ATOMIC_RELAXED);
        push_counters.last_ok_ns = agent_now_ns();
        pbuf_free(&it->req);
        retry_at = 0;
    } else if (retryable(err, a.status) && it->tries < PUSH_TRIES_MAX &&
               !at_exit) {
        retry_at = push_mono_ns() + backoff_ns(it->tries, err ? -1
                                                              : a.retry_after_s);
        enqueue(it, 1);
    } else {
        drop(it);
    }
    real_pthread_mutex_unlock(&lock);
}

SHELL_THREAD_MAIN(sender, "pprofagent-send")
static void *sender_body(void *unused)
{
    (void)unused;
    real_pthread_mutex_lock(&lock);
    for (;;) {
        if (exiting && collector_done && qlen == 0)
            break; /* at exit, each request is tried once, no retries */
        if (qlen == 0) {
            wait_until(push_mono_ns() + 1000000000LL);
            continue;
        }
        if (retry_at && push_mono_ns() < retry_at && !exiting) {
            wait_until(retry_at);
            continue;
        }
        struct item it = queue[qhead];
        qhead = (qhead + 1) % PUSH_QUEUE_MAX;
        qlen--;
        count_queue();
        real_pthread_mutex_unlock(&lock);
        send_one(&it);
        real_pthread_mutex_lock(&lock);
    }
    sender_done = 1;
    pthread_cond_broadcast(&wake);
    real_pthread_mutex_unlock(&lock);
    return NULL;
}

/* ---- start, fork, exit ----------------------------------------------------------- */

/* The last window is due: the collector makes it and leaves, the sender
 * tries what is queued once, until PUSH_EXIT_MS from now, and leaves.
 * Returns that deadline. Under lock. */
static int64_t last_window(void)
{
    exiting = 1;
    retry_at = 0;
    exit_deadline = push_mono_ns() + PUSH_EXIT_MS * 1000000LL;
    pthread_cond_broadcast(&wake);
    return exit_deadline;
}

static void push_at_exit(void)
{
    if (!started)
        return;
    guard_enter();
    real_pthread_mutex_lock(&lock);
    int64_t deadline = last_window();
    while (!sender_done && push_mono_ns() < deadline)
        wait_until(deadline);
    real_pthread_mutex_unlock(&lock);
    guard_leave();
}

/* Back to never started, the threads joined: a later attach starts the
 * push afresh. The counters start again with it. */
static void push_reset(void)
{
    qhead = qlen = 0;
    exiting = collector_done = sender_done = 0;
    retry_at = 0;
    failing = 0;
    started = 0;
    memset(&push_counters, 0, sizeof push_counters);
    push_collect_stop();
}

void push_start(void)
{
    if (!opt_push.on || started)
        return;
    started = 1;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wake, &attr);
    pthread_condattr_destroy(&attr);
    /* One instance per process: a later attach pushes as the same one, a
     * forked child as its own. */
    static pid_t instance_of;
    if (instance_of != getpid()) {
        instance_of = getpid();
        push_resource_new_instance();
    }
    int attached = start_attached;
    int err = agent_thread_spawn(sender, NULL, attached ? &sender_tid : NULL);
    if (err == 0) {
        err = agent_thread_spawn(collector, NULL,
                                 attached ? &collector_tid : NULL);
        if (err && attached) {
            /* The sender waits for nothing: made to leave, joined. */
            real_pthread_mutex_lock(&lock);
            collector_done = 1;
            last_window();
            real_pthread_mutex_unlock(&lock);
            real_pthread_join(sender_tid, NULL);
            push_reset();
        }
    }
    if (err) {
        log_info("push: cannot start its threads (%s); push is off",
                 log_errtext(-err));
        started = 0; /* the sender, if it runs, waits for nothing */
        return;
    }
    joinable = attached;
    if (!exit_registered) {
        exit_registered = 1; /* inherited by forked children */
        atexit(push_at_exit);
    }
    log_debug("push: every %lds to %s", opt_push.interval_s, opt_push.url);
}

FORK_PATH void push_fork_child(void)
{
    /* The queue's requests and the threads are the parent's: forgotten,
     * not freed (another thread of the parent's may have been using
     * them). */
    if (!__atomic_load_n(&started, __ATOMIC_RELAXED))
        return;
    /* On the stack: read-only data would be a page more to fault in. */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    fork_reset(&lock, &fresh, sizeof lock);
    FORK_SET(qhead, 0);
    FORK_SET(qlen, 0);
    FORK_SET(started, 0);
    FORK_SET(exiting, 0);
    FORK_SET(collector_done, 0);
    FORK_SET(sender_done, 0);
    FORK_SET(retry_at, 0);
    FORK_SET(joinable, 0); /* an attached parent's threads: not here */
    fork_zero(queue, sizeof queue);
    fork_zero(&push_counters, sizeof push_counters);
    push_collect_fork_child();
}

void push_stop(void)
{
    if (!joinable)
        return;
    guard_enter();
    real_pthread_mutex_lock(&lock);
    last_window();
    real_pthread_mutex_unlock(&lock);
    real_pthread_join(collector_tid, NULL);
    real_pthread_join(sender_tid, NULL);
    joinable = 0;
    push_reset();
    guard_leave();
}
