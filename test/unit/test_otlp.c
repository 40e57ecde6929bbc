/*
 * Unit tests for encoder/otlp.c: profile.proto messages as the kind writers
 * make them become OTLP Profiles, one per kept sample type, over one
 * dictionary shared by every profile of the request (a function, a
 * mapping, a stack added twice is written once), with labels as
 * attributes ("thread" as thread.name), the build id on the mapping, the
 * resource's attributes, and a message that is not a profile refused.
 * (The Collector's own decoder reads the result in
 * test/integration/otlp_push.sh.)
 */
#include "encoder/otlp.h"
#include "harness.h"

#include <errno.h>
#include <string.h>

/* A CPU-like profile: two sample types, two samples on one stack. */
static void make_profile(struct pbuf *gz)
{
    struct profile *p = profile_timed("cpu", 10000000, 1000, 2000, NULL);
    assert_true(p != NULL);
    uint64_t m = profile_mapping(p, 0x1000, 0x2000, 0, "/bin/prog",
                                 "00112233445566778899aabbccddeeff00112233");
    uint64_t f = profile_function(p, "unique_function_name", "_Z1fv",
                                  "prog.c", 7);
    struct profile_line line = {f, 9};
    uint64_t loc = profile_location(p, m, 0x1234, &line, 1);
    int64_t v[2] = {3, 30000000};
    struct profile_label l = {"thread", "worker-1", 0, NULL};
    profile_sample(p, &loc, 1, v, 2, &l, 1);
    profile_sample(p, &loc, 1, v, 2, NULL, 0);
    assert_true(profile_write_gzip(p, gz) == 0);
    profile_free(p);
}

static size_t count(const struct pbuf *b, const char *s)
{
    size_t n = 0, k = strlen(s);
    for (size_t i = 0; i + k <= b->len; i++)
        n += memcmp(b->data + i, s, k) == 0;
    return n;
}

TEST(profiles_share_one_dictionary)
{
    struct pbuf gz = {0}, out = {0};
    make_profile(&gz);
    struct otlp_batch *b = otlp_batch_new();
    assert_true(b != NULL);
    expect_int_eq(otlp_batch_add(b, &gz, NULL), 2);
    static const char *const keep[] = {"cpu", NULL};
    expect_int_eq(otlp_batch_add(b, &gz, keep), 1);
    expect_int_eq(otlp_batch_profiles(b), 3);
    struct otlp_kv res[] = {{"service.name", "svc", 0},
                            {"process.pid", NULL, 4242}};
    expect_int_eq(otlp_batch_write(b, res, 2, "pprofagent", "1", &out), 0);
    /* Each string once, however many profiles use it. */
    expect_int_eq(count(&out, "unique_function_name"), 1);
    expect_int_eq(count(&out, "/bin/prog"), 1);
    expect_int_eq(count(&out, "thread.name"), 1);
    expect_int_eq(count(&out, "worker-1"), 1);
    expect_int_eq(count(&out, "process.executable.build_id.gnu"), 1);
    expect_int_eq(count(&out, "00112233445566778899aabbccddeeff00112233"), 1);
    expect_int_eq(count(&out, "service.name"), 1);
    expect_int_eq(count(&out, "pprofagent"), 1);
    /* The request starts with its ResourceProfiles (field 1, bytes). */
    expect_int_eq(out.data[0], 0x0a);
    otlp_batch_free(b);
    pbuf_free(&gz);
    pbuf_free(&out);
}

TEST(not_a_profile)
{
    struct otlp_batch *b = otlp_batch_new();
    assert_true(b != NULL);
    struct pbuf junk = {0}, gz = {0};
    pbuf_puts(&junk, "\xff\xff\xff\xff not a profile");
    assert_true(gzip_compress(junk.data, junk.len, &gz) == 0);
    expect_int_eq(otlp_batch_add(b, &gz, NULL), -EINVAL);
    expect_int_eq(otlp_batch_add(b, &junk, NULL), -EINVAL);
    expect_int_eq(otlp_batch_profiles(b), 0);
    otlp_batch_free(b);
    pbuf_free(&junk);
    pbuf_free(&gz);
}

int main(void)
{
    return run_tests(profiles_share_one_dictionary, not_a_profile, NULL);
}
