/*
 * The hash index (agent/core/htab.c) and the text order of stack
 * records (encoder/stack_records.c): what every profile writer relies on.
 */
#include "harness.h"

#include "encoder/encoder.h"

#include <stdlib.h>
#include <string.h>

static int u64_eq(const void *ctx, size_t idx, const void *key)
{
    return ((const uint64_t *)ctx)[idx] == *(const uint64_t *)key;
}

/* Many keys, some colliding on purpose (same low bits), each found again
 * at the index it was given, absent ones not found, through every grow. */
TEST(index_finds_what_it_holds)
{
    enum { N = 5000 };
    uint64_t *keys = malloc(N * sizeof *keys);
    assert_true(keys != NULL);
    struct htab t = {0};
    uint64_t probe = 0;
    expect_true(htab_find(&t, 1, u64_eq, NULL, &probe) == NULL);
    for (size_t i = 0; i < N; i++) {
        keys[i] = (uint64_t)i << 20; /* the mixer must spread these */
        uint64_t h = i % 3 ? hash_splitmix64(keys[i]) : 7; /* a third collide */
        struct htab_slot *s = htab_find_for_insert(&t, h, u64_eq, keys,
                                                   &keys[i]);
        assert_true(s != NULL);
        expect_int_eq(s->idx1, 0);
        htab_set(&t, s, h, i);
    }
    expect_int_eq(t.count, N);
    expect_true(t.count * 2 <= t.cap);
    for (size_t i = 0; i < N; i++) {
        uint64_t h = i % 3 ? hash_splitmix64(keys[i]) : 7;
        struct htab_slot *s = htab_find(&t, h, u64_eq, keys, &keys[i]);
        assert_true(s != NULL);
        expect_int_eq(s->idx1, i + 1);
    }
    uint64_t absent = 12345;
    struct htab_slot *s = htab_find(&t, hash_splitmix64(absent), u64_eq, keys,
                                    &absent);
    expect_true(s != NULL && s->idx1 == 0);
    htab_free(&t);
    expect_int_eq(t.cap, 0);
    free(keys);
}

TEST(hash_of_bytes_depends_on_every_byte)
{
    const char a[] = "allocs", b[] = "allocz";
    expect_true(htab_hash_bytes(a, 6, 0) != htab_hash_bytes(b, 6, 0));
    expect_true(htab_hash_bytes(a, 6, 0) != htab_hash_bytes(a, 6, 1));
    expect_true(htab_hash_bytes(a, 6, 0) == htab_hash_bytes(a, 6, 0));
}

static void value_headline(const struct stack_record *r, struct pbuf *out)
{
    pbuf_printf(out, "%lld/%lld", (long long)r->values[0],
                (long long)r->values[1]);
}

/* Records sorted by their keys, largest first; ties without a tie-break
 * keep their order; all-zero records are left out. Frames are pseudo
 * ones, which need no symbols. */
TEST(text_order_is_the_forms)
{
    uintptr_t s1[1] = {1}, s2[2] = {1, 2}, s3[1] = {2};
    struct stack_record recs[4] = {
        {.pcs = s1, .depth = 1, .values = {1, 5}},
        {.pcs = s2, .depth = 2, .values = {3, 5}},
        {.pcs = s3, .depth = 1, .values = {0, 0}},
        {.pcs = s3, .depth = 1, .values = {9, 1}},
    };
    struct stack_text_form by_second = {.keys = {1}, .nkeys = 1,
                                        .headline = value_headline};
    struct pbuf out = {0};
    expect_int_eq(stack_records_text(recs, 4, &by_second, &out), 0);
    pbuf_append(&out, "", 1);
    const char *t = (const char *)out.data;
    const char *a = strstr(t, "1/5 @"), *b = strstr(t, "3/5 @"),
               *c = strstr(t, "9/1 @");
    expect_true(a && b && c && a < b && b < c);
    expect_true(strstr(t, "0/0") == NULL);
    pbuf_free(&out);

    struct stack_text_form by_first = {.keys = {0, 1}, .nkeys = 2,
                                       .tiebreak = 1,
                                       .headline = value_headline};
    expect_int_eq(stack_records_text(recs, 4, &by_first, &out), 0);
    pbuf_append(&out, "", 1);
    t = (const char *)out.data;
    a = strstr(t, "9/1 @");
    b = strstr(t, "3/5 @");
    c = strstr(t, "1/5 @");
    expect_true(a && b && c && a < b && b < c);
    pbuf_free(&out);
}

int main(void)
{
    return run_tests(index_finds_what_it_holds,
                     hash_of_bytes_depends_on_every_byte,
                     text_order_is_the_forms, NULL);
}
