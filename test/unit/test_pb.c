/*
 * Unit tests for encoder/buf.c, encoder/pb.c and encoder/gzip.c: golden
 * bytes for varints, tagged scalars (zeros skipped, negatives as ten-byte
 * varints), runs of scalar fields, length-delimited and packed fields and
 * nested messages, buffer growth, and a gzip round trip through zlib's own
 * inflater.
 */
#include "encoder/encoder.h"
#include "harness.h"

#include <zlib.h>

/* Compares a buffer with golden bytes and prints both on a mismatch. */
#define expect_bytes(b, ...)                                                   \
    do {                                                                       \
        static const uint8_t want_[] = {__VA_ARGS__};                          \
        check_bytes(__LINE__, (b), want_, sizeof want_);                       \
    } while (0)

static void check_bytes(int line, const struct pbuf *b, const uint8_t *want,
                        size_t n)
{
    if (!b->oom && b->len == n && (n == 0 || memcmp(b->data, want, n) == 0))
        return;
    fprintf(stderr, "  line %d: got", line);
    for (size_t i = 0; i < b->len; i++)
        fprintf(stderr, " %02x", b->data[i]);
    fprintf(stderr, "\n          want");
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %02x", want[i]);
    fputc('\n', stderr);
    harness_failures++;
}

TEST(varint_golden)
{
    struct pbuf b = {0};
    pb_varint(&b, 0);
    expect_bytes(&b, 0x00);
    b.len = 0;
    pb_varint(&b, 1);
    expect_bytes(&b, 0x01);
    b.len = 0;
    pb_varint(&b, 127);
    expect_bytes(&b, 0x7f);
    b.len = 0;
    pb_varint(&b, 128);
    expect_bytes(&b, 0x80, 0x01);
    b.len = 0;
    pb_varint(&b, 300);
    expect_bytes(&b, 0xac, 0x02);
    b.len = 0;
    pb_varint(&b, 16384);
    expect_bytes(&b, 0x80, 0x80, 0x01);
    b.len = 0;
    pb_varint(&b, UINT64_MAX);
    expect_bytes(&b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                 0x01);
    pbuf_free(&b);
}

TEST(scalar_fields)
{
    struct pbuf b = {0};
    /* Zero is the proto3 default and is left out. */
    pb_uint64(&b, 1, 0);
    pb_int64(&b, 2, 0);
    pb_bool(&b, 3, 0);
    expect_int_eq(b.len, 0);

    pb_uint64(&b, 1, 150);
    expect_bytes(&b, 0x08, 0x96, 0x01);
    b.len = 0;
    pb_bool(&b, 7, 42);
    expect_bytes(&b, 0x38, 0x01);
    b.len = 0;
    /* Field 16 needs a two-byte tag: (16 << 3) | 0 = 128. */
    pb_uint64(&b, 16, 1);
    expect_bytes(&b, 0x80, 0x01, 0x01);
    b.len = 0;
    /* A realistic time_nanos; golden bytes computed independently. */
    pb_int64(&b, 9, 1700000000000000000LL);
    expect_bytes(&b, 0x48, 0x80, 0x80, 0xa8, 0xb1, 0xe3, 0x9f, 0xe7, 0xcb,
                 0x17);
    pbuf_free(&b);
}

TEST(negative_int64)
{
    struct pbuf b = {0};
    /* int64 is not zigzag: -1 is the varint of 0xffff_ffff_ffff_ffff. */
    pb_int64(&b, 3, -1);
    expect_bytes(&b, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                 0xff, 0x01);
    b.len = 0;
    pb_int64(&b, 3, -2);
    expect_bytes(&b, 0x18, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                 0xff, 0x01);
    b.len = 0;
    pb_int64(&b, 3, INT64_MIN);
    expect_bytes(&b, 0x18, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                 0x80, 0x01);
    pbuf_free(&b);
}

TEST(bytes_fields)
{
    struct pbuf b = {0};
    /* An empty string is still written: string_table[0] depends on it. */
    pb_bytes(&b, 6, "", 0);
    expect_bytes(&b, 0x32, 0x00);
    b.len = 0;
    pb_bytes(&b, 6, "go", 2);
    expect_bytes(&b, 0x32, 0x02, 'g', 'o');
    pbuf_free(&b);
}

TEST(packed_fields)
{
    struct pbuf b = {0};
    uint64_t u[] = {1, 300, 0};
    pb_packed_uint64(&b, 1, u, 0);
    expect_int_eq(b.len, 0);
    /* Zeros inside a packed run are positional and stay. */
    pb_packed_uint64(&b, 1, u, 3);
    expect_bytes(&b, 0x0a, 0x04, 0x01, 0xac, 0x02, 0x00);
    b.len = 0;
    int64_t v[] = {-1, 5};
    pb_packed_int64(&b, 2, v, 0);
    expect_int_eq(b.len, 0);
    pb_packed_int64(&b, 2, v, 2);
    expect_bytes(&b, 0x12, 0x0b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                 0xff, 0xff, 0x01, 0x05);
    pbuf_free(&b);
}

/* A run of scalar fields numbered in a row: fields 2, 3, 4 with the zero
 * left out and a negative int64 as ten bytes; then the same kind of run as
 * a message of fields 1.. (how profile.proto's and OTLP's flat messages
 * are written). */
TEST(varint_runs)
{
    struct pbuf b = {0};
    uint64_t v[] = {150, 0, (uint64_t)-1};
    pb_varints(&b, 2, v, 3);
    expect_bytes(&b, 0x10, 0x96, 0x01, 0x20, 0xff, 0xff, 0xff, 0xff, 0xff,
                 0xff, 0xff, 0xff, 0xff, 0x01);
    b.len = 0;
    uint64_t w[] = {1, 0, 3};
    pb_varints_message(&b, 4, w, 3);
    expect_bytes(&b, 0x22, 0x04, 0x08, 0x01, 0x18, 0x03);
    pbuf_free(&b);
}

TEST(nested_messages)
{
    struct pbuf b = {0};
    size_t m = pb_begin(&b, 2);
    pb_uint64(&b, 1, 150);
    pb_end(&b, m);
    expect_bytes(&b, 0x12, 0x03, 0x08, 0x96, 0x01);
    b.len = 0;

    /* An empty message is a tag and a zero length. */
    m = pb_begin(&b, 11);
    pb_end(&b, m);
    expect_bytes(&b, 0x5a, 0x00);
    b.len = 0;

    /* Two levels: Location { id: 1, line { function_id: 2, line: 3 } }. */
    m = pb_begin(&b, 4);
    pb_uint64(&b, 1, 1);
    size_t inner = pb_begin(&b, 4);
    pb_uint64(&b, 1, 2);
    pb_int64(&b, 2, 3);
    pb_end(&b, inner);
    pb_end(&b, m);
    expect_bytes(&b, 0x22, 0x08, 0x08, 0x01, 0x22, 0x04, 0x08, 0x02, 0x10,
                 0x03);
    b.len = 0;

    /* A body of 200 bytes needs a two-byte length, so pb_end must move it. */
    uint8_t payload[197];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)i;
    pb_uint64(&b, 1, 7); /* something before the message */
    m = pb_begin(&b, 3);
    pb_bytes(&b, 1, payload, sizeof payload);
    pb_end(&b, m);
    pb_uint64(&b, 2, 9); /* and something after it */
    assert_true(!b.oom);
    expect_int_eq(b.len, 2 + 3 + 200 + 2);
    static const uint8_t head[] = {0x08, 0x07, 0x1a, 0xc8, 0x01,
                                   0x0a, 0xc5, 0x01};
    expect_mem_eq(b.data, head, sizeof head);
    expect_mem_eq(b.data + sizeof head, payload, sizeof payload);
    expect_int_eq(b.data[b.len - 2], 0x10);
    expect_int_eq(b.data[b.len - 1], 0x09);
    pbuf_free(&b);
}

TEST(pbuf_growth)
{
    struct pbuf b = {0};
    pbuf_puts(&b, "hello");
    pbuf_printf(&b, ", %s %d", "world", 42);
    expect_int_eq(b.len, 15);
    expect_mem_eq(b.data, "hello, world 42", 15);

    /* Longer than any initial capacity: the slow path of pbuf_printf. */
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    pbuf_printf(&b, "[%s]", big);
    expect_int_eq(b.len, 15 + 2 + 4999);
    expect_int_eq(b.data[15], '[');
    expect_int_eq(b.data[b.len - 1], ']');
    expect_int_eq(b.data[b.len - 2], 'x');

    for (int i = 0; i < 100000; i++)
        pbuf_append(&b, "ab", 2);
    expect_int_eq(b.len, 15 + 5001 + 200000);
    expect_true(b.cap >= b.len);
    expect_true(!b.oom);

    pbuf_free(&b);
    expect_true(b.data == NULL);
    expect_int_eq(b.len, 0);
    expect_int_eq(b.cap, 0);
}

/* Inflates a gzip member with zlib; returns the decompressed length or -1. */
static long gunzip(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    z_stream zs = {0};
    if (inflateInit2(&zs, 31) != Z_OK)
        return -1;
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    int rc = inflate(&zs, Z_FINISH);
    long len = rc == Z_STREAM_END && zs.avail_in == 0 ? (long)zs.total_out : -1;
    inflateEnd(&zs);
    return len;
}

TEST(gzip_round_trip)
{
    size_t n = 1 << 20;
    uint8_t *in = malloc(n);
    uint8_t *back = malloc(n + 1);
    assert_true(in && back);
    /* Half compressible text, half noise, to exercise several chunks. */
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        in[i] = i < n / 2 ? (uint8_t)('a' + i % 7) : (uint8_t)(x >> 24);
    }
    struct pbuf out = {0};
    pbuf_puts(&out, "prefix"); /* gzip appends, it does not overwrite */
    expect_int_eq(gzip_compress(in, n, &out), 0);
    assert_true(out.len > 6 + 18);
    expect_mem_eq(out.data, "prefix", 6);
    expect_int_eq(out.data[6], 0x1f);
    expect_int_eq(out.data[7], 0x8b);
    expect_int_eq(gunzip(out.data + 6, out.len - 6, back, n + 1), n);
    expect_mem_eq(back, in, n);
    pbuf_free(&out);

    /* Empty input still makes a valid (empty) member. */
    expect_int_eq(gzip_compress("", 0, &out), 0);
    expect_int_eq(out.data[0], 0x1f);
    expect_int_eq(out.data[1], 0x8b);
    expect_int_eq(gunzip(out.data, out.len, back, n), 0);
    pbuf_free(&out);
    free(in);
    free(back);
}

int main(void)
{
    return run_tests(varint_golden, scalar_fields, negative_int64,
                     bytes_fields, packed_fields, varint_runs,
                     nested_messages,
                     pbuf_growth, gzip_round_trip, NULL);
}
