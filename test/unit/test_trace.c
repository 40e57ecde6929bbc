/*
 * Unit tests for the execution trace's recorder (agent/trace/trace_rec.c)
 * and writer (encoder/trace.c, encoder/trace_wire.c): records made on this
 * thread come out as Go's wire format, read back here with a decoder of
 * the batch layout (header, batches of a known size, the sync batch's
 * frequency, the string table, every event of the thread batches with
 * its argument count, the end-of-generation mark); one trace at a time.
 * The real parser's checks are the integration tests' (go tool trace).
 */
#include "agent/trace/trace.h"
#include "encoder/encoder.h"

#include "harness.h"

#include <errno.h>

static int uvarint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Arguments (the time delta included) of the events the writer emits. */
static int event_args(int type)
{
    switch (type) {
    case 11: case 17: case 23: return 1; /* ProcStop, GoDestroy, SyscallEnd */
    case 39: return 2;                   /* GoLabel */
    case 13: case 16: case 20: case 22: case 41: return 3;
    case 14: case 21: case 42: case 43: return 4;
    case 40: case 44: case 48: return 5;
    default: return -1;
    }
}

struct decoded {
    int batches, sync_ok, end_ok, bad;
    int events[64];
    char strings[64][64];
    int nstrings;
};

static void decode_events(const uint8_t *p, const uint8_t *end,
                          struct decoded *d)
{
    while (p < end) {
        int type = *p++;
        int n = event_args(type);
        if (n < 0) {
            d->bad++;
            return;
        }
        for (int i = 0; i < n; i++) {
            uint64_t v;
            if (uvarint(&p, end, &v) != 0) {
                d->bad++;
                return;
            }
        }
        d->events[type]++;
    }
}

static void decode_strings(const uint8_t *p, const uint8_t *end,
                           struct decoded *d)
{
    p++; /* EvStrings */
    while (p < end) {
        uint64_t id, len;
        if (*p++ != 5 || uvarint(&p, end, &id) || uvarint(&p, end, &len) ||
            p + len > end) {
            d->bad++;
            return;
        }
        if (d->nstrings < 64 && len < 64) {
            memcpy(d->strings[d->nstrings], p, len);
            d->strings[d->nstrings++][len] = 0;
        }
        p += len;
    }
}

static void decode(const struct pbuf *b, struct decoded *d)
{
    memset(d, 0, sizeof *d);
    const uint8_t *p = b->data, *end = b->data + b->len;
    if (b->len < 17 || memcmp(p, "go 1.26 trace\0\0\0", 16) != 0) {
        d->bad++;
        return;
    }
    p += 16;
    while (p < end) {
        uint8_t kind = *p++;
        if (kind == 52) {
            d->end_ok = p == end;
            return;
        }
        uint64_t gen, m, ts, size;
        if (kind != 1 || uvarint(&p, end, &gen) || uvarint(&p, end, &m) ||
            uvarint(&p, end, &ts) || uvarint(&p, end, &size) || gen != 1 ||
            p + size > end || size == 0) {
            d->bad++;
            return;
        }
        d->batches++;
        const uint8_t *q = p, *qend = p + size;
        if (*q == 50) { /* sync: frequency in ns */
            uint64_t f;
            q += 2;
            d->sync_ok = q[-1] == 8 && uvarint(&q, qend, &f) == 0 &&
                         f == 1000000000ULL;
        } else if (*q == 4) {
            decode_strings(q, qend, d);
        } else if (*q != 2 && *q != 6) {
            decode_events(q, qend, d);
        }
        p = qend;
    }
}

static int has_string(const struct decoded *d, const char *s)
{
    for (int i = 0; i < d->nstrings; i++)
        if (strcmp(d->strings[i], s) == 0)
            return 1;
    return 0;
}

/* Stops the recording, writes it and decodes it into d (checked well
 * formed), and gives the slot back. */
static void stop_and_read(struct decoded *d)
{
    trace_stop();
    struct pbuf out = {0};
    assert_true(trace_write(NULL, 0, &out) == 0);
    decode(&out, d);
    expect_int_eq(d->bad, 0);
    pbuf_free(&out);
    trace_release();
}

TEST(records_come_out_as_go_trace)
{
    assert_true(trace_start() == 0);
    expect_int_eq(trace_start(), -EBUSY);
    int64_t t0 = trace_clock();
    trace_interval(TRACE_SYNC, 0x1234, t0, 0);
    trace_interval(TRACE_COND, 0, trace_clock(), 0);
    trace_interval(TRACE_NET, 3, trace_clock(), 0);
    trace_interval(TRACE_SLEEP, 0, trace_clock(), 0);
    trace_interval(TRACE_SYSCALL, 4, trace_clock(), 0);
    trace_instant(TRACE_TASK_BEGIN, 7, 0, "request", 7);
    trace_instant(TRACE_REGION_BEGIN, 7, 0, "parse", 5);
    trace_instant(TRACE_REGION_END, 7, 0, "parse", 5);
    trace_instant(TRACE_LOG, 7, 0, "user\0alice", 10);
    trace_instant(TRACE_TASK_END, 7, 0, NULL, 0);
    struct decoded d;
    stop_and_read(&d);
    expect_true(d.end_ok);
    expect_true(d.sync_ok);
    expect_int_eq(d.events[20], 4); /* GoBlock: sync, cond, network, sleep */
    expect_int_eq(d.events[21], 4); /* each unblocked */
    expect_int_eq(d.events[22], 1); /* GoSyscallBegin */
    expect_int_eq(d.events[23], 1);
    expect_int_eq(d.events[40], 1); /* the task, its region, its log */
    expect_int_eq(d.events[42], 1);
    expect_int_eq(d.events[43], 1);
    expect_int_eq(d.events[44], 1);
    expect_int_eq(d.events[41], 1);
    expect_true(has_string(&d, "sync"));
    expect_true(has_string(&d, "sync.(*Cond).Wait"));
    expect_true(has_string(&d, "network"));
    expect_true(has_string(&d, "sleep"));
    expect_true(has_string(&d, "request"));
    expect_true(has_string(&d, "alice"));
    expect_true(has_string(&d, "test_trace")); /* this thread's name */

    /* The slot is free again; nothing recorded before is in the next. */
    assert_true(trace_start() == 0);
    stop_and_read(&d);
    expect_int_eq(d.events[20], 0);
}

TEST(a_region_end_that_closes_nothing_open_is_left_out)
{
    assert_true(trace_start() == 0);
    trace_instant(TRACE_REGION_BEGIN, 1, 0, "outer", 5);
    trace_instant(TRACE_REGION_END, 1, 0, "inner", 5); /* misuse */
    trace_instant(TRACE_REGION_END, 1, 0, "outer", 5);
    struct decoded d;
    stop_and_read(&d);
    expect_int_eq(d.events[42], 1);
    expect_int_eq(d.events[43], 1);
}

int main(void)
{
    return run_tests(records_come_out_as_go_trace,
                     a_region_end_that_closes_nothing_open_is_left_out, NULL);
}
