/*
 * Unit tests for encoder/profile.c: string, function and location
 * deduplication, id numbering, and the serialized message read back by a
 * small protobuf reader written here (independent of encoder/pb.c). A fixed
 * CPU-style profile is also the input of test/integration/encoder_decode.sh:
 * when PROFILE_OUT or PROFILE_OUT_GZ are set, its raw or gzipped encoding is
 * written to those files for protoc and go tool pprof to check.
 */
#include "encoder/encoder.h"
#include "harness.h"

#include <time.h>
#include <zlib.h>

/* ---- a minimal protobuf reader for checking output ------------------------ */

struct rd {
    const uint8_t *p, *end;
    int err;
};

struct fld {
    int num, wire;
    uint64_t v;       /* wire type 0 */
    const uint8_t *p; /* wire type 2 */
    size_t n;
};

static uint64_t rd_varint(struct rd *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) {
            r->err = 1;
            return 0;
        }
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
    }
    r->err = 1;
    return 0;
}

/* Reads the next field; 0 at the end or on an error (then r->err is set). */
static int rd_field(struct rd *r, struct fld *f)
{
    if (r->err || r->p >= r->end)
        return 0;
    uint64_t tag = rd_varint(r);
    f->num = (int)(tag >> 3);
    f->wire = (int)(tag & 7);
    if (f->wire == 0) {
        f->v = rd_varint(r);
    } else if (f->wire == 2) {
        f->n = (size_t)rd_varint(r);
        if (r->err || f->n > (size_t)(r->end - r->p)) {
            r->err = 1;
            return 0;
        }
        f->p = r->p;
        r->p += f->n;
    } else {
        r->err = 1;
    }
    return !r->err;
}

static struct rd sub(const struct fld *f)
{
    struct rd r = {f->p, f->p + f->n, 0};
    return r;
}

/* Reads a packed run (or a single unpacked varint) into out; returns n. */
static size_t rd_packed(const struct fld *f, uint64_t *out, size_t cap)
{
    if (f->wire == 0) {
        if (cap)
            out[0] = f->v;
        return 1;
    }
    struct rd r = sub(f);
    size_t n = 0;
    while (r.p < r.end && !r.err) {
        uint64_t v = rd_varint(&r);
        if (n < cap)
            out[n] = v;
        n++;
    }
    return n;
}

#define MAXN 16

struct dsample {
    uint64_t locs[MAXN];
    size_t nlocs;
    int64_t values[MAXN];
    size_t nvalues;
    int64_t label_key[MAXN], label_str[MAXN], label_num[MAXN],
        label_unit[MAXN];
    size_t nlabels;
};

struct dloc {
    uint64_t id, mapping_id, address;
    uint64_t line_fn[MAXN];
    int64_t line_no[MAXN];
    size_t nlines;
};

struct dmapping {
    uint64_t id, start, limit, offset;
    int64_t filename, build_id;
    int has[4];
};

struct dfunction {
    uint64_t id;
    int64_t name, system_name, filename, start_line;
};

/* What the reader found; the first MAXN of each repeated message are kept
 * in full, the rest only counted and id-checked. */
struct decoded {
    int ok;
    char **strs;
    size_t nstrs;
    int64_t stype[MAXN][2];
    size_t nstypes;
    size_t nsamples;
    struct dsample samples[MAXN];
    size_t nmappings;
    struct dmapping mappings[MAXN];
    size_t nlocs;
    struct dloc locs[MAXN];
    size_t nfunctions;
    struct dfunction functions[MAXN];
    int ids_sequential; /* every mapping/location/function id == index+1 */
    int time_count;
    int64_t time_nanos, duration_nanos, drop_frames, default_sample_type;
    int64_t period_type[2], period;
    int64_t comments[MAXN];
    size_t ncomments;
    int unknown_fields;
};

static void decode_sample(const struct fld *f, struct dsample *s)
{
    struct rd r = sub(f);
    struct fld g;
    uint64_t tmp[MAXN];
    while (rd_field(&r, &g)) {
        if (g.num == 1) {
            s->nlocs += rd_packed(&g, s->locs + s->nlocs, MAXN - s->nlocs);
        } else if (g.num == 2) {
            size_t n = rd_packed(&g, tmp, MAXN);
            for (size_t i = 0; i < n && s->nvalues < MAXN; i++)
                s->values[s->nvalues++] = (int64_t)tmp[i];
        } else if (g.num == 3 && s->nlabels < MAXN) {
            struct rd lr = sub(&g);
            struct fld h;
            size_t i = s->nlabels++;
            while (rd_field(&lr, &h)) {
                int64_t v = (int64_t)h.v;
                if (h.num == 1)
                    s->label_key[i] = v;
                else if (h.num == 2)
                    s->label_str[i] = v;
                else if (h.num == 3)
                    s->label_num[i] = v;
                else if (h.num == 4)
                    s->label_unit[i] = v;
            }
        }
    }
}

static void decode_location(const struct fld *f, struct dloc *l)
{
    struct rd r = sub(f);
    struct fld g;
    while (rd_field(&r, &g)) {
        if (g.num == 1)
            l->id = g.v;
        else if (g.num == 2)
            l->mapping_id = g.v;
        else if (g.num == 3)
            l->address = g.v;
        else if (g.num == 4 && l->nlines < MAXN) {
            struct rd lr = sub(&g);
            struct fld h;
            size_t i = l->nlines++;
            while (rd_field(&lr, &h)) {
                if (h.num == 1)
                    l->line_fn[i] = h.v;
                else if (h.num == 2)
                    l->line_no[i] = (int64_t)h.v;
            }
        }
    }
}

static uint64_t first_id(const struct fld *f)
{
    struct rd r = sub(f);
    struct fld g;
    while (rd_field(&r, &g))
        if (g.num == 1 && g.wire == 0)
            return g.v;
    return 0;
}

static void decode_pair(const struct fld *f, int64_t out[2])
{
    struct rd r = sub(f);
    struct fld g;
    while (rd_field(&r, &g))
        if (g.num == 1 || g.num == 2)
            out[g.num - 1] = (int64_t)g.v;
}

static void decode(const uint8_t *data, size_t len, struct decoded *d)
{
    memset(d, 0, sizeof *d);
    d->ids_sequential = 1;
    struct rd r = {data, data + len, 0};
    struct fld f;
    size_t strs_cap = 0;
    while (rd_field(&r, &f)) {
        switch (f.num) {
        case 1:
            if (d->nstypes < MAXN)
                decode_pair(&f, d->stype[d->nstypes++]);
            break;
        case 2:
            if (d->nsamples < MAXN)
                decode_sample(&f, &d->samples[d->nsamples]);
            d->nsamples++;
            break;
        case 3: {
            uint64_t id = first_id(&f);
            if (id != d->nmappings + 1)
                d->ids_sequential = 0;
            if (d->nmappings < MAXN) {
                struct dmapping *m = &d->mappings[d->nmappings];
                struct rd mr = sub(&f);
                struct fld g;
                while (rd_field(&mr, &g)) {
                    switch (g.num) {
                    case 1: m->id = g.v; break;
                    case 2: m->start = g.v; break;
                    case 3: m->limit = g.v; break;
                    case 4: m->offset = g.v; break;
                    case 5: m->filename = (int64_t)g.v; break;
                    case 6: m->build_id = (int64_t)g.v; break;
                    case 7: case 8: case 9: case 10:
                        m->has[g.num - 7] = (int)g.v;
                        break;
                    }
                }
            }
            d->nmappings++;
            break;
        }
        case 4:
            if (first_id(&f) != d->nlocs + 1)
                d->ids_sequential = 0;
            if (d->nlocs < MAXN)
                decode_location(&f, &d->locs[d->nlocs]);
            d->nlocs++;
            break;
        case 5: {
            if (first_id(&f) != d->nfunctions + 1)
                d->ids_sequential = 0;
            if (d->nfunctions < MAXN) {
                struct dfunction *fn = &d->functions[d->nfunctions];
                struct rd fr = sub(&f);
                struct fld g;
                while (rd_field(&fr, &g)) {
                    switch (g.num) {
                    case 1: fn->id = g.v; break;
                    case 2: fn->name = (int64_t)g.v; break;
                    case 3: fn->system_name = (int64_t)g.v; break;
                    case 4: fn->filename = (int64_t)g.v; break;
                    case 5: fn->start_line = (int64_t)g.v; break;
                    }
                }
            }
            d->nfunctions++;
            break;
        }
        case 6:
            if (d->nstrs == strs_cap) {
                strs_cap = strs_cap ? strs_cap * 2 : 64;
                d->strs = realloc(d->strs, strs_cap * sizeof *d->strs);
            }
            d->strs[d->nstrs++] = strndup((const char *)f.p, f.n);
            break;
        case 7: d->drop_frames = (int64_t)f.v; break;
        case 9:
            d->time_count++;
            d->time_nanos = (int64_t)f.v;
            break;
        case 10: d->duration_nanos = (int64_t)f.v; break;
        case 11: decode_pair(&f, d->period_type); break;
        case 12: d->period = (int64_t)f.v; break;
        case 13: {
            uint64_t tmp[MAXN];
            size_t n = rd_packed(&f, tmp, MAXN);
            for (size_t i = 0; i < n && d->ncomments < MAXN; i++)
                d->comments[d->ncomments++] = (int64_t)tmp[i];
            break;
        }
        case 14: d->default_sample_type = (int64_t)f.v; break;
        default: d->unknown_fields++; break;
        }
    }
    d->ok = !r.err && r.p == r.end;
}

static void decoded_free(struct decoded *d)
{
    for (size_t i = 0; i < d->nstrs; i++)
        free(d->strs[i]);
    free(d->strs);
}

/* The string at a table index, or a marker when the index is out of range
 * (which pprof would reject as "malformed profile format"). */
static const char *str_at(const struct decoded *d, int64_t idx)
{
    if (idx < 0 || (size_t)idx >= d->nstrs)
        return "<bad string index>";
    return d->strs[idx];
}

/* Serializes p (then frees it) and decodes the result into d, which must
 * parse to the end with ids numbered 1..N; the caller frees d. */
static void serialize_decode(struct profile *p, struct decoded *d)
{
    struct pbuf out = {0};
    expect_int_eq(profile_serialize(p, &out), 0);
    decode(out.data, out.len, d);
    expect_true(d->ok);
    expect_true(d->ids_sequential);
    pbuf_free(&out);
    profile_free(p);
}

/* ---- builder behaviour ----------------------------------------------------- */

TEST(strings_dedup)
{
    struct profile *p = profile_new();
    assert_true(p != NULL);
    expect_int_eq(profile_string(p, ""), 0);
    expect_int_eq(profile_string(p, NULL), 0);
    expect_int_eq(profile_string(p, "alpha"), 1);
    expect_int_eq(profile_string(p, "beta"), 2);
    expect_int_eq(profile_string(p, "alpha"), 1);
    expect_int_eq(profile_string(p, "alph"), 3);
    /* Many distinct strings force the index to grow several times. */
    char name[32];
    for (int i = 0; i < 20000; i++) {
        snprintf(name, sizeof name, "s%d", i);
        expect_int_eq(profile_string(p, name), 4 + i);
    }
    for (int i = 0; i < 20000; i += 997) {
        snprintf(name, sizeof name, "s%d", i);
        expect_int_eq(profile_string(p, name), 4 + i);
    }
    expect_int_eq(profile_string(p, "beta"), 2);
    profile_free(p);
}

TEST(functions_dedup)
{
    struct profile *p = profile_new();
    assert_true(p != NULL);
    expect_int_eq(profile_function(p, "main", "main", "m.c", 10), 1);
    expect_int_eq(profile_function(p, "work", "work", "m.c", 20), 2);
    expect_int_eq(profile_function(p, "main", "main", "m.c", 10), 1);
    /* Each of the four parts of the key matters. */
    expect_int_eq(profile_function(p, "main", "main", "m.c", 11), 3);
    expect_int_eq(profile_function(p, "main", "_Z4mainv", "m.c", 10), 4);
    expect_int_eq(profile_function(p, "main", "main", "n.c", 10), 5);
    expect_int_eq(profile_function(p, "main2", "main", "m.c", 10), 6);
    /* NULL and "" are the same string (index 0). */
    expect_int_eq(profile_function(p, "f", NULL, NULL, 0), 7);
    expect_int_eq(profile_function(p, "f", "", "", 0), 7);
    expect_int_eq(profile_function(p, "work", "work", "m.c", 20), 2);
    profile_free(p);
}

TEST(locations_dedup)
{
    struct profile *p = profile_new();
    assert_true(p != NULL);
    uint64_t m = profile_mapping(p, 0x1000, 0x9000, 0, "/bin/x", NULL);
    expect_int_eq(m, 1);
    struct profile_line l1 = {profile_function(p, "a", "a", "", 0), 5};
    struct profile_line l2 = {profile_function(p, "b", "b", "", 0), 6};
    expect_int_eq(profile_find_location(p, 0x1234), 0);
    expect_int_eq(profile_location(p, m, 0x1234, &l1, 1), 1);
    expect_int_eq(profile_location(p, m, 0x2000, NULL, 0), 2);
    /* A known address keeps its id and its first lines. */
    expect_int_eq(profile_location(p, m, 0x1234, &l2, 1), 1);
    expect_int_eq(profile_find_location(p, 0x1234), 1);
    expect_int_eq(profile_find_location(p, 0x2000), 2);
    expect_int_eq(profile_find_location(p, 0x2001), 0);
    /* Pseudo frames (address 0) are never merged nor found. */
    expect_int_eq(profile_location(p, 0, 0, &l2, 1), 3);
    expect_int_eq(profile_location(p, 0, 0, &l2, 1), 4);
    expect_int_eq(profile_find_location(p, 0), 0);
    expect_int_eq(profile_location(p, m, 0x3000, NULL, 0), 5);

    struct decoded d;
    serialize_decode(p, &d);
    expect_int_eq(d.nlocs, 5);
    expect_int_eq(d.locs[0].address, 0x1234);
    expect_int_eq(d.locs[0].mapping_id, 1);
    expect_int_eq(d.locs[0].nlines, 1);
    expect_int_eq(d.locs[0].line_fn[0], 1);
    expect_int_eq(d.locs[0].line_no[0], 5);
    expect_int_eq(d.locs[1].nlines, 0);
    expect_int_eq(d.locs[2].address, 0);
    expect_int_eq(d.locs[2].mapping_id, 0);
    expect_int_eq(d.locs[2].line_fn[0], 2);
    decoded_free(&d);
}

TEST(mappings_numbered)
{
    struct profile *p = profile_new();
    assert_true(p != NULL);
    expect_int_eq(profile_mapping(p, 0x400000, 0x500000, 0, "/bin/a", "ab"),
                  1);
    expect_int_eq(profile_mapping(p, 0x600000, 0x700000, 0x1000, "[vdso]",
                                  NULL),
                  2);
    /* Mappings are not deduplicated: the caller adds each one once. */
    expect_int_eq(profile_mapping(p, 0x400000, 0x500000, 0, "/bin/a", "ab"),
                  3);
    profile_mapping_flags(p, 1, PROFILE_HAS_FUNCTIONS);
    profile_mapping_flags(p, 1, PROFILE_HAS_LINE_NUMBERS);
    profile_mapping_flags(p, 3, PROFILE_HAS_INLINE_FRAMES);
    profile_mapping_flags(p, 9, PROFILE_HAS_FUNCTIONS); /* ignored */

    struct decoded d;
    serialize_decode(p, &d);
    expect_int_eq(d.nmappings, 3);
    expect_int_eq(d.mappings[0].start, 0x400000);
    expect_int_eq(d.mappings[0].limit, 0x500000);
    expect_str_eq(str_at(&d, d.mappings[0].filename), "/bin/a");
    expect_str_eq(str_at(&d, d.mappings[0].build_id), "ab");
    expect_int_eq(d.mappings[0].has[0], 1);
    expect_int_eq(d.mappings[0].has[1], 0);
    expect_int_eq(d.mappings[0].has[2], 1);
    expect_int_eq(d.mappings[0].has[3], 0);
    expect_int_eq(d.mappings[1].offset, 0x1000);
    expect_int_eq(d.mappings[1].build_id, 0);
    expect_str_eq(str_at(&d, d.mappings[1].filename), "[vdso]");
    expect_int_eq(d.mappings[1].has[0], 0);
    expect_int_eq(d.mappings[2].has[3], 1);
    decoded_free(&d);
}

TEST(empty_profile_golden)
{
    struct profile *p = profile_new();
    assert_true(p != NULL);
    struct pbuf out = {0};
    expect_int_eq(profile_serialize(p, &out), 0);
    /* Nothing but string_table[0] = "": field 6, length 0. */
    static const uint8_t want[] = {0x32, 0x00};
    expect_int_eq(out.len, sizeof want);
    expect_mem_eq(out.data, want, sizeof want);
    pbuf_free(&out);
    profile_free(p);
}

TEST(small_profile_golden)
{
    struct profile *p = profile_new();
    assert_true(p != NULL);
    profile_sample_type(p, "n", "count");
    uint64_t loc = profile_location(p, 0, 0x10, NULL, 0);
    int64_t v = 3;
    profile_sample(p, &loc, 1, &v, 1, NULL, 0);
    profile_time(p, 5, 0);
    struct pbuf out = {0};
    expect_int_eq(profile_serialize(p, &out), 0);
    static const uint8_t want[] = {
        0x0a, 0x04, 0x08, 0x01, 0x10, 0x02,       /* sample_type {1, 2} */
        0x12, 0x06, 0x0a, 0x01, 0x01, 0x12, 0x01, /* sample {loc [1], */
        0x03,                                     /*   value [3]} */
        0x22, 0x04, 0x08, 0x01, 0x18, 0x10,       /* location {1, 0x10} */
        0x32, 0x00, 0x32, 0x01, 'n',              /* "", "n", */
        0x32, 0x05, 'c', 'o', 'u', 'n', 't',      /* "count" */
        0x48, 0x05,                               /* time_nanos 5 */
    };
    expect_int_eq(out.len, sizeof want);
    expect_mem_eq(out.data, want, sizeof want < out.len ? sizeof want : out.len);
    pbuf_free(&out);
    profile_free(p);
}

/* ---- the fixture shared with the integration test ------------------------ */

#define FIX_TIME 1700000000123456789LL
#define FIX_DURATION 1000000000LL
#define FIX_PERIOD 10000000LL
#define FIX_BUILD_ID "0123456789abcdef0123456789abcdef01234567"

/* A CPU profile of a pretend program: 75 samples in hot_inner (inlined
 * into work_hot), 25 in work_cold, both called from main via libc. */
static struct profile *build_fixture(void)
{
    struct profile *p = profile_new();
    if (!p)
        return NULL;
    profile_sample_type(p, "samples", "count");
    profile_sample_type(p, "cpu", "nanoseconds");
    profile_period(p, "cpu", "nanoseconds", FIX_PERIOD);
    profile_time(p, FIX_TIME, FIX_DURATION);
    profile_default_sample_type(p, "cpu");
    profile_comment(p, "pprofagent encoder test");
    profile_comment(p, "second comment");
    profile_drop_frames(p, "malloc|free");

    uint64_t exe = profile_mapping(p, 0x400000, 0x500000, 0,
                                   "/opt/encoder-test/demo", FIX_BUILD_ID);
    uint64_t libc =
        profile_mapping(p, 0x7f0000000000ULL, 0x7f0000100000ULL, 0x26000,
                        "/lib/x86_64-linux-gnu/libc.so.6", "93ac61ec");
    profile_mapping_flags(p, exe,
                          PROFILE_HAS_FUNCTIONS | PROFILE_HAS_FILENAMES |
                              PROFILE_HAS_LINE_NUMBERS |
                              PROFILE_HAS_INLINE_FRAMES);
    profile_mapping_flags(p, libc, PROFILE_HAS_FUNCTIONS);

    uint64_t f_main = profile_function(p, "main", "main", "demo.c", 10);
    uint64_t f_hot = profile_function(p, "work_hot", "work_hot", "demo.c", 40);
    uint64_t f_inner =
        profile_function(p, "hot_inner", "hot_inner", "demo.c", 30);
    uint64_t f_cold =
        profile_function(p, "work_cold", "work_cold", "demo.c", 50);
    uint64_t f_libc = profile_function(p, "__libc_start_call_main",
                                       "__libc_start_call_main", NULL, 0);

    struct profile_line main_line = {f_main, 20};
    struct profile_line hot_lines[2] = {{f_inner, 33}, {f_hot, 41}};
    struct profile_line cold_line = {f_cold, 55};
    struct profile_line libc_line = {f_libc, 0};
    uint64_t l_main = profile_location(p, exe, 0x401000, &main_line, 1);
    uint64_t l_hot = profile_location(p, exe, 0x401100, hot_lines, 2);
    uint64_t l_cold = profile_location(p, exe, 0x401200, &cold_line, 1);
    uint64_t l_libc =
        profile_location(p, libc, 0x7f0000001000ULL, &libc_line, 1);

    uint64_t hot_stack[] = {l_hot, l_main, l_libc};
    uint64_t cold_stack[] = {l_cold, l_main, l_libc};
    int64_t hot_values[] = {75, 75 * FIX_PERIOD};
    int64_t cold_values[] = {25, 25 * FIX_PERIOD};
    struct profile_label hot_labels[] = {
        {.key = "thread", .str = "worker-1"},
    };
    struct profile_label cold_labels[] = {
        {.key = "thread", .str = "worker-2"},
        {.key = "bytes", .num = 4096, .num_unit = "bytes"},
        {.key = "delta", .num = -3},
    };
    profile_sample(p, hot_stack, 3, hot_values, 2, hot_labels, 1);
    profile_sample(p, cold_stack, 3, cold_values, 2, cold_labels, 3);
    return p;
}

static int write_file(const char *path, const struct pbuf *b)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t n = fwrite(b->data, 1, b->len, f);
    return fclose(f) == 0 && n == b->len ? 0 : -1;
}

TEST(fixture_round_trip)
{
    struct profile *p = build_fixture();
    assert_true(p != NULL);
    struct pbuf raw = {0}, again = {0}, gz = {0};
    expect_int_eq(profile_serialize(p, &raw), 0);
    /* Serializing does not consume the profile. */
    expect_int_eq(profile_serialize(p, &again), 0);
    expect_int_eq(again.len, raw.len);
    expect_mem_eq(again.data, raw.data, raw.len);
    expect_int_eq(profile_write_gzip(p, &gz), 0);

    struct decoded d;
    decode(raw.data, raw.len, &d);
    expect_true(d.ok);
    expect_int_eq(d.unknown_fields, 0);
    assert_true(d.nstrs > 0);
    expect_str_eq(d.strs[0], "");
    /* No string is stored twice. */
    for (size_t i = 0; i < d.nstrs; i++)
        for (size_t j = i + 1; j < d.nstrs; j++)
            expect_true(strcmp(d.strs[i], d.strs[j]) != 0);

    expect_int_eq(d.time_count, 1);
    expect_int_eq(d.time_nanos, FIX_TIME);
    expect_int_eq(d.duration_nanos, FIX_DURATION);
    expect_int_eq(d.period, FIX_PERIOD);
    expect_str_eq(str_at(&d, d.period_type[0]), "cpu");
    expect_str_eq(str_at(&d, d.period_type[1]), "nanoseconds");
    expect_str_eq(str_at(&d, d.default_sample_type), "cpu");
    expect_str_eq(str_at(&d, d.drop_frames), "malloc|free");
    expect_int_eq(d.ncomments, 2);
    expect_str_eq(str_at(&d, d.comments[0]), "pprofagent encoder test");
    expect_str_eq(str_at(&d, d.comments[1]), "second comment");

    expect_int_eq(d.nstypes, 2);
    expect_str_eq(str_at(&d, d.stype[0][0]), "samples");
    expect_str_eq(str_at(&d, d.stype[0][1]), "count");
    expect_str_eq(str_at(&d, d.stype[1][0]), "cpu");
    expect_str_eq(str_at(&d, d.stype[1][1]), "nanoseconds");

    expect_true(d.ids_sequential);
    expect_int_eq(d.nmappings, 2);
    expect_str_eq(str_at(&d, d.mappings[0].filename),
                  "/opt/encoder-test/demo");
    expect_str_eq(str_at(&d, d.mappings[0].build_id), FIX_BUILD_ID);
    expect_int_eq(d.mappings[1].offset, 0x26000);

    expect_int_eq(d.nfunctions, 5);
    expect_str_eq(str_at(&d, d.functions[0].name), "main");
    expect_str_eq(str_at(&d, d.functions[0].filename), "demo.c");
    expect_int_eq(d.functions[0].start_line, 10);
    expect_str_eq(str_at(&d, d.functions[2].name), "hot_inner");
    expect_int_eq(d.functions[4].filename, 0);

    expect_int_eq(d.nlocs, 4);
    expect_int_eq(d.locs[1].address, 0x401100);
    expect_int_eq(d.locs[1].nlines, 2);
    expect_int_eq(d.locs[1].line_fn[0], 3); /* hot_inner, innermost */
    expect_int_eq(d.locs[1].line_no[0], 33);
    expect_int_eq(d.locs[1].line_fn[1], 2); /* work_hot */
    expect_int_eq(d.locs[3].mapping_id, 2);

    expect_int_eq(d.nsamples, 2);
    expect_int_eq(d.samples[0].nlocs, 3);
    expect_int_eq(d.samples[0].locs[0], 2);
    expect_int_eq(d.samples[0].locs[1], 1);
    expect_int_eq(d.samples[0].locs[2], 4);
    expect_int_eq(d.samples[0].nvalues, 2);
    expect_int_eq(d.samples[0].values[0], 75);
    expect_int_eq(d.samples[0].values[1], 750000000);
    expect_int_eq(d.samples[0].nlabels, 1);
    expect_str_eq(str_at(&d, d.samples[0].label_key[0]), "thread");
    expect_str_eq(str_at(&d, d.samples[0].label_str[0]), "worker-1");
    expect_int_eq(d.samples[1].values[0], 25);
    expect_int_eq(d.samples[1].values[1], 250000000);
    expect_int_eq(d.samples[1].nlabels, 3);
    expect_str_eq(str_at(&d, d.samples[1].label_key[1]), "bytes");
    expect_int_eq(d.samples[1].label_str[1], 0);
    expect_int_eq(d.samples[1].label_num[1], 4096);
    expect_str_eq(str_at(&d, d.samples[1].label_unit[1]), "bytes");
    expect_int_eq(d.samples[1].label_num[2], -3);
    expect_int_eq(d.samples[1].label_unit[2], 0);
    decoded_free(&d);

    /* The gzip form inflates to exactly the raw form. */
    assert_true(gz.len > 18);
    expect_int_eq(gz.data[0], 0x1f);
    expect_int_eq(gz.data[1], 0x8b);
    uint8_t *back = malloc(raw.len + 1);
    uLongf back_len = raw.len + 1;
    z_stream zs = {0};
    assert_true(back && inflateInit2(&zs, 31) == Z_OK);
    zs.next_in = gz.data;
    zs.avail_in = (uInt)gz.len;
    zs.next_out = back;
    zs.avail_out = (uInt)back_len;
    expect_int_eq(inflate(&zs, Z_FINISH), Z_STREAM_END);
    expect_int_eq(zs.total_out, raw.len);
    expect_mem_eq(back, raw.data, raw.len);
    inflateEnd(&zs);
    free(back);

    /* Hand the encodings to the integration test when it asks. */
    const char *out = getenv("PROFILE_OUT");
    const char *out_gz = getenv("PROFILE_OUT_GZ");
    if (out && *out)
        expect_int_eq(write_file(out, &raw), 0);
    if (out_gz && *out_gz)
        expect_int_eq(write_file(out_gz, &gz), 0);

    pbuf_free(&raw);
    pbuf_free(&again);
    pbuf_free(&gz);
    profile_free(p);
}

/* ---- scale ------------------------------------------------------------------- */

/* This thread's CPU time: what the encoding cost, whatever else runs. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Builds, encodes and gzips a profile of n distinct locations and samples
 * (5000 functions); sets *cpu to the CPU seconds it took and, when raw is
 * not NULL, hands back the serialized message. */
static void build_encode(int n, struct pbuf *raw, double *cpu_out)
{
    double t0 = cpu_seconds();
    struct profile *p = profile_new();
    assert_true(p != NULL);
    profile_sample_type(p, "samples", "count");
    uint64_t m = profile_mapping(p, 0x400000, 0x40000000, 0, "/bin/big", NULL);
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "fn_%d", i % 5000);
        struct profile_line ln = {profile_function(p, name, name, "big.c", 0),
                                  i};
        uint64_t addr = 0x400000 + (uint64_t)i * 16;
        uint64_t id = profile_location(p, m, addr, &ln, 1);
        expect_int_eq(id, i + 1);
        uint64_t stack[2] = {id, profile_location(p, m, 0x400000, NULL, 0)};
        int64_t v = i + 1;
        profile_sample(p, stack, 2, &v, 1, NULL, 0);
    }
    for (int i = 0; i < n; i += 7)
        expect_int_eq(profile_find_location(p, 0x400000 + (uint64_t)i * 16),
                      i + 1);
    struct pbuf out = {0};
    expect_int_eq(profile_write_gzip(p, &out), 0);
    struct pbuf own = {0};
    expect_int_eq(profile_serialize(p, &own), 0);
    double cpu = cpu_seconds() - t0;
    fprintf(stderr, "  (%d samples: %.3f s of CPU, %zu bytes raw, %zu gzipped)\n",
            n, cpu, own.len, out.len);
    if (raw)
        *raw = own;
    else
        pbuf_free(&own);
    pbuf_free(&out);
    profile_free(p);
    *cpu_out = cpu;
}

TEST(large_profile_linear)
{
    /* Linear, not quadratic: four times the locations cost about four
     * times the CPU (a quadratic lookup would cost sixteen times). The
     * thread's own CPU clock, so that other work on the machine does not
     * count; the bound leaves room for cache effects. */
    enum { N = 100000 };
    double quarter = 0, whole = 0;
    build_encode(N / 4, NULL, &quarter);
    struct pbuf raw = {0};
    build_encode(N, &raw, &whole);
    fprintf(stderr, "  (ratio %.2f for 4x the samples)\n", whole / quarter);
    expect_true(whole < 9.0 * quarter + 0.05);

    struct decoded d;
    decode(raw.data, raw.len, &d);
    expect_true(d.ok);
    expect_true(d.ids_sequential);
    expect_int_eq(d.nlocs, N);
    expect_int_eq(d.nsamples, N);
    expect_int_eq(d.nfunctions, 5000);
    expect_int_eq(d.time_count, 0);
    expect_str_eq(d.strs[0], "");
    decoded_free(&d);
    pbuf_free(&raw);
}

int main(void)
{
    return run_tests(strings_dedup, functions_dedup, locations_dedup,
                     mappings_numbered, empty_profile_golden,
                     small_profile_golden, fixture_round_trip,
                     large_profile_linear, NULL);
}
