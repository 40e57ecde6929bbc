/*
 * Unit tests for the deadlock look (agent/locks/deadlock.c), with real
 * threads really stuck: the notes are written here as the interposers
 * write them (the interposers stay out of the unit tests' archive), with a
 * start ten seconds in the past, just before each blocking call. The
 * holders come from the locks themselves. The stuck threads stay stuck
 * until the test program exits.
 */
#include "agent/locks/contention.h"
#include "agent/locks/deadlock.h"

#include "harness.h"

#include <pthread.h>
#include <unistd.h>

void lock_hooks_init(void) {}
void wait_hooks_init(void) {}
void futex_hooks_init(void) {}

#define PAST (10 * 1000000000LL)

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t c = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t self_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t both;
static int pipe_fds[2];
static volatile int holders_ready;

/* Notes a wait on lock begun PAST ago, then takes it (for ever). */
static void stuck_on(pthread_mutex_t *m)
{
    deadlock_wait_begin(m, DEADLOCK_MUTEX, contention_clock() - PAST);
    pthread_mutex_lock(m);
}

/* The two threads of the cycle: each takes a and b, in opposite orders. */
struct lock_order {
    const char *name;
    pthread_mutex_t *first, *second;
};
static struct lock_order take_ab = {"t-ab", &a, &b};
static struct lock_order take_ba = {"t-ba", &b, &a};

static void *take_in_order(void *arg)
{
    const struct lock_order *o = arg;
    pthread_setname_np(pthread_self(), o->name);
    pthread_mutex_lock(o->first);
    pthread_barrier_wait(&both);
    stuck_on(o->second);
    return NULL;
}

static void *reader(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "t-reader");
    char byte;
    pthread_mutex_lock(&c);
    pthread_rwlock_wrlock(&rw);
    __atomic_add_fetch(&holders_ready, 1, __ATOMIC_SEQ_CST);
    while (read(pipe_fds[0], &byte, 1) != 0)
        ;
    return NULL;
}

static void *waiter(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "t-waiter");
    stuck_on(&c);
    return NULL;
}

static void *rw_waiter(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "t-rwwaiter");
    deadlock_wait_begin(&rw, DEADLOCK_RWLOCK, contention_clock() - PAST);
    pthread_rwlock_rdlock(&rw);
    return NULL;
}

static void *self(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "t-self");
    pthread_mutex_lock(&self_lock);
    stuck_on(&self_lock); /* a normal mutex taken twice: stuck for good */
    return NULL;
}

static void spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_create(&t, NULL, fn, arg);
    pthread_detach(t);
}

/* The group of r with a thread called name, or NULL. */
static const struct deadlock_group *group_of(const struct deadlock_report *r,
                                             const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        for (size_t j = 0; j < r->groups[i].n; j++)
            if (strcmp(r->groups[i].threads[j].name, name) == 0)
                return &r->groups[i];
    return NULL;
}

static int settled(void)
{
    struct deadlock_report r;
    if (deadlock_look(PAST / 2, &r) != 0)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < r.n; i++)
        n += r.groups[i].n;
    deadlock_report_free(&r);
    return n == 6; /* 2 + 1 in cycles, 2 + 1 in the chain */
}

TEST(cycles_and_chains_are_found)
{
    assert_true(pipe(pipe_fds) == 0);
    pthread_barrier_init(&both, NULL, 2);
    spawn(reader, NULL);
    while (__atomic_load_n(&holders_ready, __ATOMIC_SEQ_CST) == 0)
        usleep(1000);
    spawn(take_in_order, &take_ab);
    spawn(take_in_order, &take_ba);
    spawn(waiter, NULL);
    spawn(rw_waiter, NULL);
    spawn(self, NULL);
    /* Wait for the state: every thread blocked where it stays. */
    for (int i = 0; i < 2000 && !settled(); i++)
        usleep(5000);

    struct deadlock_report r;
    assert_true(deadlock_look(PAST / 2, &r) == 0);
    expect_int_eq(r.n, 3);
    const struct deadlock_group *g = group_of(&r, "t-ab");
    assert_true(g != NULL);
    expect_int_eq(g->type, DEADLOCK_CYCLE);
    expect_int_eq(g->n, 2);
    expect_true(group_of(&r, "t-ba") == g);
    /* Each waits for the other: the holders are each other. */
    expect_int_eq(g->threads[0].held_by, g->threads[1].tid);
    expect_int_eq(g->threads[1].held_by, g->threads[0].tid);
    expect_true(g->threads[0].blocked_ns >= PAST);

    g = group_of(&r, "t-self");
    assert_true(g != NULL);
    expect_int_eq(g->type, DEADLOCK_CYCLE);
    expect_int_eq(g->n, 1);
    expect_int_eq(g->threads[0].held_by, g->threads[0].tid);

    /* The mutex waiter and the rwlock waiter behind one holder in read():
     * one chain, the holder last, not waiting on a lock. */
    g = group_of(&r, "t-reader");
    assert_true(g != NULL);
    expect_int_eq(g->type, DEADLOCK_CHAIN);
    expect_int_eq(g->n, 3);
    expect_true(group_of(&r, "t-waiter") == g);
    expect_true(group_of(&r, "t-rwwaiter") == g);
    const struct deadlock_thread *h = &g->threads[g->n - 1];
    expect_str_eq(h->name, "t-reader");
    expect_int_eq(h->kind, 0);
    expect_int_eq(h->syscall, 0 /* read */);
    for (size_t i = 0; i + 1 < g->n; i++)
        expect_int_eq(g->threads[i].held_by, h->tid);
    deadlock_report_free(&r);

    /* Waits shorter than the threshold are never listed. */
    assert_true(deadlock_look(PAST * 100, &r) == 0);
    expect_int_eq(r.n, 0);
    expect_int_eq(r.waiting, 5);
    deadlock_report_free(&r);
}

TEST(a_cycle_is_known_in_any_rotation)
{
    struct deadlock_thread t[3] = {{.tid = 11, .lock = &a},
                                   {.tid = 12, .lock = &b},
                                   {.tid = 13, .lock = &c}};
    struct deadlock_thread u[3] = {t[1], t[2], t[0]};
    struct deadlock_group g = {DEADLOCK_CYCLE, 3, t}, h = {DEADLOCK_CYCLE, 3, u};
    expect_true(deadlock_cycle_key(&g) == deadlock_cycle_key(&h));
    t[2].lock = &self_lock;
    expect_true(deadlock_cycle_key(&g) != deadlock_cycle_key(&h));
}

int main(void)
{
    return run_tests(cycles_and_chains_are_found,
                     a_cycle_is_known_in_any_rotation, NULL);
}
