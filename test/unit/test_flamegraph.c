/*
 * Reading profiles back and drawing them: gzip_decompress against
 * gzip_compress, decode.c against the profile builder (types, samples,
 * inlined lines, the default type, pprof's choice of sample index),
 * malformed input refused without a crash, and the SVG's folded values,
 * shares and escaping.
 */
#include "encoder/encoder.h"
#include "encoder/flamegraph.h"

#include "harness.h"

#include <errno.h>
#include <time.h>

TEST(gzip_round_trip)
{
    char in[5000];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (char)('a' + (i * 7) % 23);
    struct pbuf gz = {0}, out = {0};
    assert_true(gzip_compress(in, sizeof in, &gz) == 0);
    expect_int_eq(gzip_decompress(gz.data, gz.len, 1 << 20, &out), 0);
    expect_int_eq(out.len, sizeof in);
    expect_mem_eq(out.data, in, sizeof in);

    /* Two members, as Go's reader accepts. */
    size_t one = gz.len;
    pbuf_append(&gz, gz.data, one);
    pbuf_free(&out);
    expect_int_eq(gzip_decompress(gz.data, gz.len, 1 << 20, &out), 0);
    expect_int_eq(out.len, 2 * sizeof in);

    /* Bounded output, truncated input, not gzip at all. */
    pbuf_free(&out);
    expect_int_eq(gzip_decompress(gz.data, one, 100, &out), -EFBIG);
    pbuf_free(&out);
    expect_int_eq(gzip_decompress(gz.data, one - 5, 1 << 20, &out), -EINVAL);
    pbuf_free(&out);
    expect_int_eq(gzip_decompress(in, sizeof in, 1 << 20, &out), -EINVAL);
    pbuf_free(&out);
    expect_int_eq(gzip_decompress("", 0, 1 << 20, &out), -EINVAL);
    pbuf_free(&out);
    pbuf_free(&gz);
}

#define NASTY "a<b>&\"c'"

/*
 * main -> mid -> leaf (20 samples, 200 ns) and main -> NASTY (10, 100 ns),
 * where mid and leaf share one location (leaf inlined into mid), and one
 * unsymbolized frame 0x1234 under main (5, 50 ns).
 */
static int make_profile(struct pbuf *raw, const char *default_type)
{
    struct profile *p = profile_new();
    if (!p)
        return -1;
    profile_sample_type(p, "samples", "count");
    profile_sample_type(p, "cpu", "nanoseconds");
    if (default_type)
        profile_default_sample_type(p, default_type);
    uint64_t fmain = profile_function(p, "main", "main", "m.c", 1);
    uint64_t fmid = profile_function(p, "mid", "mid", "m.c", 10);
    uint64_t fleaf = profile_function(p, "leaf", "leaf", "m.c", 20);
    uint64_t fnasty = profile_function(p, NASTY, NASTY, "m.c", 30);
    struct profile_line lmain = {fmain, 2};
    struct profile_line inl[2] = {{fleaf, 21}, {fmid, 11}};
    struct profile_line lnasty = {fnasty, 31};
    uint64_t a = profile_location(p, 0, 0x1000, &lmain, 1);
    uint64_t b = profile_location(p, 0, 0x2000, inl, 2);
    uint64_t c = profile_location(p, 0, 0x3000, &lnasty, 1);
    uint64_t d = profile_location(p, 0, 0x1234, NULL, 0);
    uint64_t s1[] = {b, a}, s2[] = {c, a}, s3[] = {d, a};
    int64_t v1[] = {20, 200}, v2[] = {10, 100}, v3[] = {5, 50};
    profile_sample(p, s1, 2, v1, 2, NULL, 0);
    profile_sample(p, s2, 2, v2, 2, NULL, 0);
    profile_sample(p, s3, 2, v3, 2, NULL, 0);
    int err = profile_serialize(p, raw);
    profile_free(p);
    return err;
}

TEST(decode_profile)
{
    struct pbuf raw = {0};
    assert_true(make_profile(&raw, "samples") == 0);
    struct decoded_profile d;
    assert_true(decoded_profile_read(raw.data, raw.len, &d) == 0);
    expect_int_eq(d.ntypes, 2);
    expect_str_eq(decoded_string(&d, d.types[1].type), "cpu");
    expect_str_eq(decoded_string(&d, d.types[1].unit), "nanoseconds");
    expect_int_eq(d.nsamples, 3);
    expect_int_eq(d.nlocations, 4);
    expect_int_eq(d.nfunctions, 4);
    expect_int_eq(d.samples[0].nlocations, 2);
    expect_int_eq(d.samples[0].values[1], 200);
    expect_int_eq(decoded_total(&d, 0), 35);
    expect_int_eq(decoded_total(&d, 1), 350);
    /* The inlined location keeps its lines innermost first. */
    const struct decoded_location *l = NULL;
    for (size_t i = 0; i < d.nlocations; i++)
        if (d.locations[i].address == 0x2000)
            l = &d.locations[i];
    assert_true(l != NULL);
    expect_int_eq(l->nfunctions, 2);

    /* pprof's choice: the named type, an index, the default, the last. */
    expect_int_eq(decoded_sample_index(&d, NULL), 0); /* default: samples */
    expect_int_eq(decoded_sample_index(&d, "cpu"), 1);
    expect_int_eq(decoded_sample_index(&d, "0"), 0);
    expect_int_eq(decoded_sample_index(&d, "2"), -1);
    expect_int_eq(decoded_sample_index(&d, "inuse_space"), -1);
    decoded_profile_free(&d);
    pbuf_free(&raw);

    assert_true(make_profile(&raw, NULL) == 0);
    assert_true(decoded_profile_read(raw.data, raw.len, &d) == 0);
    expect_int_eq(decoded_sample_index(&d, ""), 1); /* no default: last */
    decoded_profile_free(&d);
    pbuf_free(&raw);
}

static int contains(const struct pbuf *b, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= b->len; i++)
        if (memcmp(b->data + i, needle, n) == 0)
            return 1;
    return 0;
}

TEST(decode_malformed)
{
    struct pbuf raw = {0};
    assert_true(make_profile(&raw, NULL) == 0);
    struct decoded_profile d;
    /* Every truncation either decodes (a shorter valid message) or is
     * refused; none may crash or leak (run under ASan to see the latter). */
    int refused = 0;
    for (size_t n = 0; n < raw.len; n++) {
        if (decoded_profile_read(raw.data, n, &d) == 0)
            decoded_profile_free(&d);
        else
            refused++;
    }
    expect_true(refused > (int)raw.len / 2);

    /* Flipped bytes: the same promise. */
    unsigned seed = 12345;
    for (int round = 0; round < 2000; round++) {
        struct pbuf m = {0};
        pbuf_append(&m, raw.data, raw.len);
        for (int k = 0; k < 3; k++) {
            seed = seed * 1103515245u + 12345u;
            m.data[(seed >> 8) % m.len] = (uint8_t)(seed >> 20);
        }
        if (decoded_profile_read(m.data, m.len, &d) == 0) {
            /* Whatever decodes must draw. */
            struct pbuf svg = {0};
            int idx = decoded_sample_index(&d, NULL);
            struct flamegraph_options opt = {.title = "t"};
            if (idx >= 0)
                expect_int_eq(flamegraph_svg(&d, idx, &opt, &svg), 0);
            pbuf_free(&svg);
            decoded_profile_free(&d);
        }
        pbuf_free(&m);
    }

    /* A string index past the table is refused. */
    static const uint8_t bad[] = {0x0a, 0x02, 0x08, 0x05, 0x32, 0x00};
    expect_int_eq(decoded_profile_read(bad, sizeof bad, &d), -EINVAL);
    /* A group wire type is refused. */
    static const uint8_t group[] = {0x0b, 0x0c};
    expect_int_eq(decoded_profile_read(group, sizeof group, &d), -EINVAL);
    /* The empty message is an empty profile; one with a type and no
     * samples draws "No samples" and nothing else. */
    expect_int_eq(decoded_profile_read("", 0, &d), 0);
    expect_int_eq(d.nstrings, 1);
    decoded_profile_free(&d);
    struct profile *p = profile_new();
    assert_true(p != NULL);
    profile_sample_type(p, "delay", "nanoseconds");
    struct pbuf e = {0}, svg = {0};
    assert_true(profile_serialize(p, &e) == 0);
    profile_free(p);
    assert_true(decoded_profile_read(e.data, e.len, &d) == 0);
    struct flamegraph_options opt = {.title = "t"};
    expect_int_eq(flamegraph_svg(&d, 0, &opt, &svg), 0);
    pbuf_append(&svg, "", 1);
    expect_true(contains(&svg, ">No samples</text>"));
    expect_true(contains(&svg, ">delay, total 0ns</text>"));
    expect_true(!contains(&svg, "<g class=\"f\""));
    decoded_profile_free(&d);
    pbuf_free(&svg);
    pbuf_free(&e);
    pbuf_free(&raw);
}

/* The script comes from encoder/flamegraph.js, embedded at build time:
 * whole (its first and last lines), with the layout's numbers in place
 * of its @XPAD@ and @FW@, and inside the CDATA section. */
TEST(svg_embeds_script)
{
    struct pbuf raw = {0}, svg = {0};
    assert_true(make_profile(&raw, NULL) == 0);
    struct decoded_profile d;
    assert_true(decoded_profile_read(raw.data, raw.len, &d) == 0);
    struct flamegraph_options opt = {.title = "t"};
    expect_int_eq(flamegraph_svg(&d, 1, &opt, &svg), 0);
    pbuf_append(&svg, "", 1);
    expect_true(contains(&svg, "<![CDATA[\n(function () {\n"));
    expect_true(contains(&svg, "XPAD = 10, FW = 7.080;\n"));
    expect_true(contains(&svg, ".toFixed(1) + '%';\n"));
    expect_true(contains(&svg, "\n})();\n]]></script>\n</svg>\n"));
    expect_true(!contains(&svg, "@XPAD@") && !contains(&svg, "@FW@"));
    decoded_profile_free(&d);
    pbuf_free(&svg);
    pbuf_free(&raw);
}

TEST(svg_values_and_escaping)
{
    struct pbuf raw = {0}, svg = {0};
    assert_true(make_profile(&raw, NULL) == 0);
    struct decoded_profile d;
    assert_true(decoded_profile_read(raw.data, raw.len, &d) == 0);
    struct flamegraph_options opt = {.title = "t<1>", .search = "le&af"};
    expect_int_eq(flamegraph_svg(&d, 1, &opt, &svg), 0);
    pbuf_append(&svg, "", 1);
    /* Folded root first: main holds everything; mid (the inlined
     * location's outer line) is main's child, leaf is mid's. */
    expect_true(contains(&svg, "<title>all (350ns, 100.00%)</title>"));
    expect_true(contains(&svg, "<title>main (350ns, 100.00%)</title>"));
    expect_true(contains(&svg, "<title>mid (200ns, 57.14%)</title>"));
    expect_true(contains(&svg, "<title>leaf (200ns, 57.14%)</title>"));
    expect_true(contains(&svg, "<title>0x1234 (50ns, 14.29%)</title>"));
    expect_true(contains(&svg,
                         "<title>a&lt;b&gt;&amp;&quot;c&apos; (100ns, "
                         "28.57%)</title>"));
    expect_true(contains(&svg, ">t&lt;1&gt;</text>"));
    expect_true(contains(&svg, "data-search=\"le&amp;af\""));
    expect_true(!contains(&svg, NASTY));
    /* leaf is drawn one row above mid, mid one above main. */
    const char *mid = strstr((char *)svg.data, "<title>mid ");
    const char *leaf = strstr((char *)svg.data, "<title>leaf ");
    assert_true(mid && leaf);
    int ymid = atoi(strstr(mid, "y=\"") + 3);
    int yleaf = atoi(strstr(leaf, "y=\"") + 3);
    expect_int_eq(ymid - yleaf, 16);
    pbuf_free(&svg);

    /* The count type names its unit after the type. */
    expect_int_eq(flamegraph_svg(&d, 0, &opt, &svg), 0);
    pbuf_append(&svg, "", 1);
    expect_true(contains(&svg, "<title>leaf (20 samples, 57.14%)</title>"));
    expect_int_eq(flamegraph_svg(&d, 2, &opt, &svg), -EINVAL);
    pbuf_free(&svg);
    decoded_profile_free(&d);
    pbuf_free(&raw);
}

/* A frame without a function name is shown as its object and file offset,
 * as a person would look it up (addr2line -e libfoo.so 0x3a2b); without a
 * mapping, as its address. */
TEST(svg_unsymbolized_names)
{
    struct profile *p = profile_new();
    assert_true(p != NULL);
    profile_sample_type(p, "samples", "count");
    uint64_t m1 = profile_mapping(p, 0x400000, 0x500000, 0, "/usr/bin/prog",
                                  NULL);
    uint64_t m2 = profile_mapping(p, 0x7f0000010000, 0x7f0000020000, 0x2000,
                                  "/usr/lib/x86_64-linux-gnu/libfoo.so.1",
                                  NULL);
    uint64_t fmain = profile_function(p, "main", "main", "m.c", 1);
    struct profile_line lmain = {fmain, 2};
    uint64_t a = profile_location(p, m1, 0x401000, &lmain, 1);
    uint64_t b = profile_location(p, m2, 0x7f0000011a2b, NULL, 0);
    uint64_t c = profile_location(p, 0, 0xdead, NULL, 0);
    uint64_t s1[] = {b, a}, s2[] = {c, a};
    int64_t v1[] = {3}, v2[] = {1};
    profile_sample(p, s1, 2, v1, 1, NULL, 0);
    profile_sample(p, s2, 2, v2, 1, NULL, 0);
    struct pbuf raw = {0}, svg = {0};
    assert_true(profile_serialize(p, &raw) == 0);
    profile_free(p);
    struct decoded_profile d;
    assert_true(decoded_profile_read(raw.data, raw.len, &d) == 0);
    expect_int_eq(d.nmappings, 2);
    struct flamegraph_options opt = {.title = "t"};
    expect_int_eq(flamegraph_svg(&d, 0, &opt, &svg), 0);
    pbuf_append(&svg, "", 1);
    expect_true(contains(&svg, "<title>[libfoo.so.1]+0x3a2b (3 samples, "
                               "75.00%)</title>"));
    expect_true(contains(&svg, "<title>0xdead (1 samples, 25.00%)</title>"));
    pbuf_free(&svg);
    decoded_profile_free(&d);
    pbuf_free(&raw);
}

TEST(svg_narrow_and_negative)
{
    struct profile *p = profile_new();
    assert_true(p != NULL);
    profile_sample_type(p, "delay", "nanoseconds");
    char name[32];
    /* One wide frame and 3000 frames of a millionth each. */
    for (int i = 0; i <= 3000; i++) {
        snprintf(name, sizeof name, "f%d", i);
        uint64_t f = profile_function(p, name, name, "", 0);
        struct profile_line ln = {f, 1};
        uint64_t loc = profile_location(p, 0, 0x1000 + (uint64_t)i, &ln, 1);
        int64_t v = i == 0 ? 1000000000 : 1;
        profile_sample(p, &loc, 1, &v, 1, NULL, 0);
    }
    uint64_t loc1 = 1;
    int64_t neg = -5;
    profile_sample(p, &loc1, 1, &neg, 1, NULL, 0);
    struct pbuf raw = {0}, svg = {0};
    assert_true(profile_serialize(p, &raw) == 0);
    profile_free(p);
    struct decoded_profile d;
    assert_true(decoded_profile_read(raw.data, raw.len, &d) == 0);
    struct flamegraph_options opt = {.title = "t"};
    expect_int_eq(flamegraph_svg(&d, 0, &opt, &svg), 0);
    pbuf_append(&svg, "", 1);
    expect_true(contains(&svg, "3000 frames narrower than 0.1 px not drawn"));
    expect_true(contains(&svg, "1 negative samples left out"));
    expect_true(contains(&svg, "<title>f0 "));
    expect_true(!contains(&svg, "<title>f1 "));
    pbuf_free(&svg);
    decoded_profile_free(&d);
    pbuf_free(&raw);
}

TEST(xml_escape_bytes)
{
    struct pbuf b = {0};
    /* Control characters, a lone continuation byte, a truncated sequence,
     * a surrogate, and valid two-, three- and four-byte characters. */
    flamegraph_xml_escape(&b, "x\x01y\x80z\xc3(\xed\xa0\x80"
                              "\xc3\xa9\xe2\x82\xac\xf0\x9f\x94\xa5");
    pbuf_append(&b, "", 1);
    expect_str_eq((char *)b.data, "x?y?z?(???\xc3\xa9\xe2\x82\xac"
                                  "\xf0\x9f\x94\xa5");
    pbuf_free(&b);
}

/*
 * Benchmark mode (test/bench/flamegraph.sh): a synthetic profile of n
 * samples, 400 functions, stacks 8..31 deep along 16 call paths with
 * three random leaf frames each, read back from gzip and drawn. bench_read_and_draw is what callgrind counts (--toggle-collect).
 */
static struct pbuf bench_gz;

__attribute__((noinline)) static size_t bench_read_and_draw(void)
{
    struct pbuf raw = {0}, svg = {0};
    struct decoded_profile d;
    size_t len = 0;
    if (gzip_decompress(bench_gz.data, bench_gz.len, (size_t)1 << 30, &raw) == 0 &&
        decoded_profile_read(raw.data, raw.len, &d) == 0) {
        struct flamegraph_options opt = {.title = "bench"};
        if (flamegraph_svg(&d, decoded_sample_index(&d, NULL), &opt, &svg) == 0)
            len = svg.len;
        decoded_profile_free(&d);
    }
    pbuf_free(&raw);
    pbuf_free(&svg);
    return len;
}

static int bench(long n, int reps)
{
    struct profile *p = profile_new();
    if (!p)
        return 1;
    profile_sample_type(p, "samples", "count");
    profile_sample_type(p, "cpu", "nanoseconds");
    uint64_t funcs[400];
    for (int i = 0; i < 400; i++) {
        char name[64];
        snprintf(name, sizeof name, "namespace::Class%d::method%d(int)", i % 37, i);
        funcs[i] = profile_function(p, name, name, "bench.cc", i);
    }
    unsigned seed = 1;
    uint64_t locs[32];
    for (long k = 0; k < n; k++) {
        seed = seed * 1103515245u + 12345u;
        int depth = 8 + (int)((seed >> 16) % 24);
        int path = (int)((seed >> 8) % 16);
        /* Callers repeat often (a few hot paths), leaves vary. */
        for (int j = 0; j < depth; j++) {
            seed = seed * 1103515245u + 12345u;
            int f = j < depth - 3 ? (path * 7 + j) % 40
                                  : (int)((seed >> 16) % 400);
            struct profile_line ln = {funcs[f], 1};
            locs[depth - 1 - j] =
                profile_location(p, 0, 0x10000 + (uint64_t)f * 16, &ln, 1);
        }
        int64_t v[2] = {1, 10000000};
        profile_sample(p, locs, (size_t)depth, v, 2, NULL, 0);
    }
    if (profile_write_gzip(p, &bench_gz) != 0)
        return 1;
    profile_free(p);
    size_t len = 0;
    struct timespec t0, t1;
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        len = bench_read_and_draw();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (ms < best)
            best = ms;
    }
    printf("samples=%ld gz_bytes=%zu svg_bytes=%zu best_ms=%.2f\n", n,
           bench_gz.len, len, best);
    pbuf_free(&bench_gz);
    return len ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "bench") == 0)
        return bench(argc > 2 ? atol(argv[2]) : 10000,
                     argc > 3 ? atoi(argv[3]) : 5);
    return run_tests(gzip_round_trip, decode_profile, decode_malformed,
                     svg_embeds_script, svg_values_and_escaping, svg_unsymbolized_names,
                     svg_narrow_and_negative,
                     xml_escape_bytes, NULL);
}
