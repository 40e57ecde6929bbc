/*
 * The CPU sample buffer: a bounded lock-free queue (sequence number per
 * slot, in the manner of Vyukov's bounded queue) between the signal
 * handlers of every host thread (producers) and the one HTTP worker that
 * runs the profile (consumer).
 *
 * Producers run in signal context: they never block, never allocate, never
 * wait for another producer. A full buffer returns NULL and the handler
 * counts the loss. The memory is mapped once, outside signal context, by
 * cpu_ringbuf_reset(), and kept for the next profile.
 *
 * Shared data: `head` is claimed by producers with a CAS; each slot's `seq`
 * is written by its producer (release, after the sample) and by the
 * consumer (release, after reading it); `tail` belongs to the consumer.
 */
#include "agent/cpu/cpu.h"

#include "agent/compiler.h"
#include "agent/core/own_memory.h"

#include <errno.h>
#include <sys/mman.h>

#define RING_SLOTS 8192 /* power of two; ~4.3 MiB, touched only as used */

struct slot {
    uint64_t seq;
    struct cpu_sample s;
};

static struct slot *ring;
static uint64_t head; /* next position a producer claims */
static uint64_t tail; /* next position the consumer reads */

int cpu_ringbuf_reset(void)
{
    if (!ring) {
        void *p = mmap(NULL, RING_SLOTS * sizeof *ring, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return -ENOMEM;
        own_memory_add(p, RING_SLOTS * sizeof *ring);
        ring = p;
    }
    for (uint64_t i = 0; i < RING_SLOTS; i++)
        __atomic_store_n(&ring[i].seq, i, __ATOMIC_RELAXED);
    __atomic_store_n(&tail, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&head, 0, __ATOMIC_SEQ_CST);
    return 0;
}

PPROF_SIGNAL_SAFE struct cpu_sample *cpu_ringbuf_claim(void)
{
    struct slot *r = __atomic_load_n(&ring, __ATOMIC_ACQUIRE);
    if (!r)
        return NULL;
    uint64_t pos = __atomic_load_n(&head, __ATOMIC_RELAXED);
    for (;;) {
        struct slot *sl = &r[pos & (RING_SLOTS - 1)];
        uint64_t seq = __atomic_load_n(&sl->seq, __ATOMIC_ACQUIRE);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (__atomic_compare_exchange_n(&head, &pos, pos + 1, 1,
                                            __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                return &sl->s;
            /* pos was reloaded by the failed CAS */
        } else if (diff < 0) {
            return NULL; /* full: the consumer has not freed this slot */
        } else {
            pos = __atomic_load_n(&head, __ATOMIC_RELAXED);
        }
    }
}

PPROF_SIGNAL_SAFE void cpu_ringbuf_commit(struct cpu_sample *s)
{
    struct slot *sl = (struct slot *)((char *)s - offsetof(struct slot, s));
    uint64_t pos = __atomic_load_n(&sl->seq, __ATOMIC_RELAXED);
    __atomic_store_n(&sl->seq, pos + 1, __ATOMIC_RELEASE);
}

void cpu_ringbuf_drain(void (*fn)(const struct cpu_sample *s, void *arg),
                       void *arg)
{
    if (!ring)
        return;
    for (;;) {
        struct slot *sl = &ring[tail & (RING_SLOTS - 1)];
        uint64_t seq = __atomic_load_n(&sl->seq, __ATOMIC_ACQUIRE);
        if (seq != tail + 1)
            return; /* empty, or the producer is still writing */
        fn(&sl->s, arg);
        __atomic_store_n(&sl->seq, tail + RING_SLOTS, __ATOMIC_RELEASE);
        tail++;
    }
}
