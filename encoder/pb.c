/*
 * pb.c is the one protobuf wire writer of the agent: varints, tagged
 * scalars, length-delimited bytes, packed repeated fields and nested
 * messages, after the shape of Go's runtime/pprof/protobuf.go. A nested
 * message's body is written first and its length varint moved in front of
 * it when the message ends, so no size pass is needed; scalars equal to
 * zero are left out. It serves profile.proto (profile.c), OTLP (otlp.c)
 * and, for its varints, Go's execution trace (trace_wire.c). It is entered
 * only from the agent's own threads while they encode; it never runs in a
 * signal handler. It knows no format: field numbers are the callers' named
 * constants (profile_fields.h; the table at the top of otlp.c).
 */
#include "encoder/encoder.h"

#include <string.h>

/* A varint of a 64-bit value never takes more than 10 bytes. */
#define VARINT_MAX 10

static size_t encode_varint(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

static void put_tag(struct pbuf *b, int field, int wire)
{
    pb_varint(b, ((uint64_t)(unsigned)field << 3) | (uint64_t)wire);
}

void pb_varint(struct pbuf *b, uint64_t v)
{
    uint8_t tmp[VARINT_MAX];
    pbuf_append(b, tmp, encode_varint(tmp, v));
}

void pb_uint64(struct pbuf *b, int field, uint64_t v)
{
    /* proto3 scalars default to zero; leaving zeros out is what Go does. */
    if (v == 0)
        return;
    put_tag(b, field, PB_WIRE_VARINT);
    pb_varint(b, v);
}

void pb_int64(struct pbuf *b, int field, int64_t v)
{
    /* int64 (not sint64) is plain two's complement: a negative value is a
     * ten-byte varint of its 64-bit pattern. */
    pb_uint64(b, field, (uint64_t)v);
}

void pb_fixed64(struct pbuf *b, int field, uint64_t v)
{
    if (v == 0)
        return;
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    put_tag(b, field, PB_WIRE_64);
    pbuf_append(b, le, sizeof le);
}

void pb_bool(struct pbuf *b, int field, int v)
{
    pb_uint64(b, field, v ? 1 : 0);
}

void pb_varints(struct pbuf *b, int first, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pb_uint64(b, first + (int)i, v[i]);
}

void pb_varints_message(struct pbuf *b, int field, const uint64_t *v,
                        size_t n)
{
    size_t m = pb_begin(b, field);
    pb_varints(b, 1, v, n);
    pb_end(b, m);
}

void pb_bytes(struct pbuf *b, int field, const void *p, size_t n)
{
    put_tag(b, field, PB_WIRE_LEN);
    pb_varint(b, n);
    pbuf_append(b, p, n);
}

void pb_packed_uint64(struct pbuf *b, int field, const uint64_t *v, size_t n)
{
    if (n == 0)
        return;
    size_t mark = pb_begin(b, field);
    for (size_t i = 0; i < n; i++)
        pb_varint(b, v[i]);
    pb_end(b, mark);
}

void pb_packed_int64(struct pbuf *b, int field, const int64_t *v, size_t n)
{
    if (n == 0)
        return;
    size_t mark = pb_begin(b, field);
    for (size_t i = 0; i < n; i++)
        pb_varint(b, (uint64_t)v[i]);
    pb_end(b, mark);
}

size_t pb_begin(struct pbuf *b, int field)
{
    put_tag(b, field, PB_WIRE_LEN);
    return b->len;
}

void pb_end(struct pbuf *b, size_t mark)
{
    if (b->oom || mark > b->len)
        return;
    size_t body = b->len - mark;
    uint8_t tmp[VARINT_MAX];
    size_t k = encode_varint(tmp, body);
    /* Grow by k bytes (their content is overwritten below), then shift the
     * body right to open a gap for the length in front of it. */
    pbuf_append(b, tmp, k);
    if (b->oom)
        return;
    memmove(b->data + mark + k, b->data + mark, body);
    memcpy(b->data + mark, tmp, k);
}
