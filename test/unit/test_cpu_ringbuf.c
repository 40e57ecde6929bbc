/*
 * The CPU sample buffer under concurrent producers: every committed
 * sample reaches the consumer exactly once and in each producer's order,
 * a full buffer refuses (and the refusals add up), and nothing is lost
 * between claim and commit.
 */
#include "agent/cpu/cpu.h"
#include "harness.h"

#include <pthread.h>

#define PRODUCERS 4
#define PER_PRODUCER 200000

static long refused[PRODUCERS];
static int producers_done;

static void *producer(void *arg)
{
    int id = (int)(long)arg;
    for (uint32_t i = 0; i < PER_PRODUCER; i++) {
        struct cpu_sample *s = cpu_ringbuf_claim();
        if (!s) {
            refused[id]++;
            continue;
        }
        s->tid = (uint32_t)id;
        s->weight = 1;
        s->depth = 1;
        s->pcs[0] = i;
        cpu_ringbuf_commit(s);
    }
    __atomic_fetch_add(&producers_done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

struct seen {
    long count[PRODUCERS];
    long last[PRODUCERS];
    int out_of_order;
};

static void consume(const struct cpu_sample *s, void *arg)
{
    struct seen *v = arg;
    if (s->tid >= PRODUCERS) {
        v->out_of_order++;
        return;
    }
    if ((long)s->pcs[0] <= v->last[s->tid])
        v->out_of_order++;
    v->last[s->tid] = (long)s->pcs[0];
    v->count[s->tid]++;
}

TEST(concurrent_producers)
{
    assert_true(cpu_ringbuf_reset() == 0);
    struct seen v;
    memset(&v, 0, sizeof v);
    for (int i = 0; i < PRODUCERS; i++)
        v.last[i] = -1;
    pthread_t t[PRODUCERS];
    for (long i = 0; i < PRODUCERS; i++)
        pthread_create(&t[i], NULL, producer, (void *)i);
    while (__atomic_load_n(&producers_done, __ATOMIC_SEQ_CST) < PRODUCERS)
        cpu_ringbuf_drain(consume, &v);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(t[i], NULL);
    cpu_ringbuf_drain(consume, &v);
    expect_int_eq(v.out_of_order, 0);
    for (int i = 0; i < PRODUCERS; i++)
        expect_int_eq(v.count[i] + refused[i], PER_PRODUCER);
}

TEST(full_buffer_refuses)
{
    assert_true(cpu_ringbuf_reset() == 0);
    long stored = 0;
    while (stored < 1000000) {
        struct cpu_sample *s = cpu_ringbuf_claim();
        if (!s)
            break;
        s->tid = 0;
        s->depth = 1;
        s->pcs[0] = (uintptr_t)stored;
        cpu_ringbuf_commit(s);
        stored++;
    }
    expect_true(stored > 1000 && stored < 1000000);
    expect_true(cpu_ringbuf_claim() == NULL);
    struct seen v;
    memset(&v, 0, sizeof v);
    v.last[0] = -1;
    cpu_ringbuf_drain(consume, &v);
    expect_int_eq(v.count[0], stored);
    expect_int_eq(v.out_of_order, 0);
    /* Room again after the drain. */
    expect_true(cpu_ringbuf_claim() != NULL);
}

int main(void)
{
    return run_tests(concurrent_producers, full_buffer_refuses, NULL);
}
