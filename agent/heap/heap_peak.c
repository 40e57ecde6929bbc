/*
 * The peak heap profile: each bucket's in-use count at the high-water
 * mark of the in-use estimate (heap_inuse_estimate()), kept by copy on
 * write instead of copies of the table. agent/heap/heap.h has the contract and
 * docs/memory.md the cost and accuracy.
 *
 * Host threads enter on the sampled paths only, with the guard entered:
 * heap_peak_note() after a sample (a compare; on a new high a CAS and an
 * increment of the epoch) and heap_peak_save() from heap_peak_touch()
 * before a bucket's first change in an epoch. HTTP workers read through
 * heap_peak_apply(). No lock, no allocation, no thread. Never entered from
 * a signal handler.
 */
#include "agent/core/clock.h"
#include "agent/heap/heap.h"
#include "agent/stacks/stack_table.h"

/* Starts at 1: a new bucket (its values zeroed) has not seen it. Raised
 * by the sample that makes a new high and by a reset. */
int64_t heap_peak_epoch = 1;

/* Exact high-water mark of the estimate in this period, when it was
 * reached, when the period began (0: at the start), how many highs it had. Written on new
 * highs by host threads, read by HTTP workers. */
static int64_t high_water;
static int64_t high_time_ns;
static int64_t since_ns;
static long highs;

void heap_peak_save(struct stack_entry *e, int64_t seen, int64_t epoch)
{
    /* The count before this change: the bucket has not changed since the
     * epoch began, so this is its count at the high. */
    int64_t inuse = stack_entry_value(e, HEAP_ALLOC_OBJECTS) -
                    stack_entry_value(e, HEAP_FREE_OBJECTS);
    if (__atomic_compare_exchange_n(&e->values[HEAP_PEAK_EPOCH], &seen, epoch,
                                    0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        __atomic_store_n(&e->values[HEAP_PEAK_OBJECTS], inuse,
                         __ATOMIC_RELEASE);
}

void heap_peak_note(int64_t inuse)
{
    int64_t hw = __atomic_load_n(&high_water, __ATOMIC_RELAXED);
    while (inuse > hw) {
        if (__atomic_compare_exchange_n(&high_water, &hw, inuse, 1,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            /* This sample's counters are in: it belongs to the new high. */
            __atomic_fetch_add(&heap_peak_epoch, 1, __ATOMIC_ACQ_REL);
            __atomic_store_n(&high_time_ns, agent_now_ns(), __ATOMIC_RELAXED);
            __atomic_fetch_add(&highs, 1, __ATOMIC_RELAXED);
            return;
        }
    }
}

void heap_peak_apply(struct stack_snapshot *snap, struct heap_peak_info *info,
                     int reset)
{
    /* The epoch first: a bucket that saved for a later one (a new high
     * while the snapshot was taken) shows its current count, close to it. */
    int64_t epoch = __atomic_load_n(&heap_peak_epoch, __ATOMIC_ACQUIRE);
    info->high_water_bytes = __atomic_load_n(&high_water, __ATOMIC_RELAXED);
    info->time_ns = __atomic_load_n(&high_time_ns, __ATOMIC_RELAXED);
    info->since_ns = __atomic_load_n(&since_ns, __ATOMIC_RELAXED);
    info->highs = __atomic_load_n(&highs, __ATOMIC_RELAXED);
    for (size_t i = 0; i < snap->n; i++) {
        int64_t *v = &snap->values[i * (size_t)snap->nvalues];
        int64_t inuse = v[HEAP_PEAK_EPOCH] == epoch
                            ? v[HEAP_PEAK_OBJECTS]
                            : v[HEAP_ALLOC_OBJECTS] - v[HEAP_FREE_OBJECTS];
        if (inuse < 0)
            inuse = 0;
        int64_t size = heap_key_size(snap->entries[i]->key);
        v[HEAP_ALLOC_OBJECTS] = inuse;
        v[HEAP_ALLOC_BYTES] = inuse * size;
        v[HEAP_FREE_OBJECTS] = 0;
        v[HEAP_FREE_BYTES] = 0;
    }
    if (reset) {
        /* The new period's peak is, so far, what is in use now. */
        __atomic_store_n(&high_water, heap_inuse_estimate(), __ATOMIC_RELAXED);
        __atomic_store_n(&since_ns, agent_now_ns(), __ATOMIC_RELAXED);
        __atomic_store_n(&high_time_ns, agent_now_ns(), __ATOMIC_RELAXED);
        __atomic_store_n(&highs, 0, __ATOMIC_RELAXED);
        __atomic_fetch_add(&heap_peak_epoch, 1, __ATOMIC_ACQ_REL);
    }
}
