/*
 * decode.c reads a profile.proto message back: the sample types, samples,
 * mappings (range, offset, file), locations (with their mapping and the
 * function of each line), functions, string table and default sample type; every other field is skipped by its wire type. It
 * is the agent's reader of its own profiles (flame graphs, totals for
 * /debug/stats), entered only from HTTP threads, never from a signal
 * handler or an interposed call.
 *
 * It must never read outside the buffer or trust an index: every length
 * is checked against what is left, every string index against the table,
 * and a malformed message gives -EINVAL with nothing left allocated.
 */
#include "encoder/flamegraph.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Field numbers of profile.proto that the reader keeps. */
enum {
    P_SAMPLE_TYPE = 1,
    P_SAMPLE = 2,
    P_MAPPING = 3,
    P_LOCATION = 4,
    P_FUNCTION = 5,
    P_STRING_TABLE = 6,
    P_DURATION_NANOS = 10,
    P_DEFAULT_SAMPLE_TYPE = 14,
};
enum { VT_TYPE = 1, VT_UNIT = 2 };
enum { S_LOCATION_ID = 1, S_VALUE = 2 };
enum { M_ID = 1, M_START = 2, M_LIMIT = 3, M_OFFSET = 4, M_FILENAME = 5 };
enum { L_ID = 1, L_MAPPING_ID = 2, L_ADDRESS = 3, L_LINE = 4 };
enum { LN_FUNCTION_ID = 1 };
enum { F_ID = 1, F_NAME = 2 };

enum { WIRE_VARINT = 0, WIRE_64 = 1, WIRE_LEN = 2, WIRE_32 = 5 };

/* A cursor over a message (or a nested one). */
struct reader {
    const uint8_t *p;
    const uint8_t *end;
};

static int read_varint(struct reader *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end)
            return -EINVAL;
        uint8_t b = *r->p++;
        if (shift == 63 && b > 1)
            return -EINVAL;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -EINVAL;
}

/* Reads a tag: field number and wire type. */
static int read_tag(struct reader *r, int *field, int *wire)
{
    uint64_t t;
    if (read_varint(r, &t) != 0 || (t >> 3) == 0 || (t >> 3) > 0x1fffffff)
        return -EINVAL;
    *field = (int)(t >> 3);
    *wire = (int)(t & 7);
    return 0;
}

/* Reads a length-delimited payload into *sub. */
static int read_len(struct reader *r, struct reader *sub)
{
    uint64_t n;
    if (read_varint(r, &n) != 0 || n > (uint64_t)(r->end - r->p))
        return -EINVAL;
    sub->p = r->p;
    sub->end = r->p + n;
    r->p += n;
    return 0;
}

static int skip(struct reader *r, int wire)
{
    uint64_t v;
    struct reader sub;
    switch (wire) {
    case WIRE_VARINT: return read_varint(r, &v);
    case WIRE_LEN: return read_len(r, &sub);
    case WIRE_64:
        if (r->end - r->p < 8)
            return -EINVAL;
        r->p += 8;
        return 0;
    case WIRE_32:
        if (r->end - r->p < 4)
            return -EINVAL;
        r->p += 4;
        return 0;
    default: return -EINVAL; /* groups are not used by profile.proto */
    }
}

/* Grows *arr (of elements of size el) so that one more fits. */
static int grow(void **arr, size_t *cap, size_t n, size_t el)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    if (c > SIZE_MAX / el)
        return -ENOMEM;
    void *a = realloc(*arr, c * el);
    if (!a)
        return -ENOMEM;
    *arr = a;
    *cap = c;
    return 0;
}

/* A repeated scalar (uint64 or int64), packed or not, appended to *arr. */
static int read_repeated(struct reader *r, int wire, uint64_t **arr,
                         size_t *n, size_t *cap)
{
    if (wire == WIRE_VARINT) {
        uint64_t v;
        if (read_varint(r, &v) != 0)
            return -EINVAL;
        if (grow((void **)arr, cap, *n, sizeof **arr) != 0)
            return -ENOMEM;
        (*arr)[(*n)++] = v;
        return 0;
    }
    if (wire != WIRE_LEN)
        return -EINVAL;
    struct reader sub;
    if (read_len(r, &sub) != 0)
        return -EINVAL;
    while (sub.p < sub.end) {
        uint64_t v;
        if (read_varint(&sub, &v) != 0)
            return -EINVAL;
        int err = grow((void **)arr, cap, *n, sizeof **arr);
        if (err != 0)
            return err;
        (*arr)[(*n)++] = v;
    }
    return 0;
}

static int read_value_type(struct reader *r, struct decoded_type *t)
{
    memset(t, 0, sizeof *t);
    while (r->p < r->end) {
        int field, wire;
        uint64_t v;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        if ((field == VT_TYPE || field == VT_UNIT) && wire == WIRE_VARINT) {
            if (read_varint(r, &v) != 0)
                return -EINVAL;
            if (field == VT_TYPE)
                t->type = (int64_t)v;
            else
                t->unit = (int64_t)v;
        } else if (skip(r, wire) != 0) {
            return -EINVAL;
        }
    }
    return 0;
}

static int read_sample(struct reader *r, struct decoded_sample *s)
{
    size_t lcap = 0, vcap = 0;
    memset(s, 0, sizeof *s);
    while (r->p < r->end) {
        int field, wire, err;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        if (field == S_LOCATION_ID)
            err = read_repeated(r, wire, &s->locations, &s->nlocations, &lcap);
        else if (field == S_VALUE)
            err = read_repeated(r, wire, (uint64_t **)&s->values, &s->nvalues,
                                &vcap);
        else
            err = skip(r, wire);
        if (err != 0)
            return err;
    }
    return 0;
}

static int read_location(struct reader *r, struct decoded_location *l)
{
    size_t cap = 0;
    memset(l, 0, sizeof *l);
    while (r->p < r->end) {
        int field, wire, err = 0;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        if (field == L_ID && wire == WIRE_VARINT) {
            err = read_varint(r, &l->id);
        } else if (field == L_ADDRESS && wire == WIRE_VARINT) {
            err = read_varint(r, &l->address);
        } else if (field == L_MAPPING_ID && wire == WIRE_VARINT) {
            err = read_varint(r, &l->mapping_id);
        } else if (field == L_LINE && wire == WIRE_LEN) {
            struct reader line;
            uint64_t fn = 0;
            if (read_len(r, &line) != 0)
                return -EINVAL;
            while (line.p < line.end) {
                int lf, lw;
                if (read_tag(&line, &lf, &lw) != 0)
                    return -EINVAL;
                if (lf == LN_FUNCTION_ID && lw == WIRE_VARINT)
                    err = read_varint(&line, &fn);
                else
                    err = skip(&line, lw);
                if (err != 0)
                    return -EINVAL;
            }
            err = grow((void **)&l->functions, &cap, l->nfunctions,
                       sizeof *l->functions);
            if (err == 0)
                l->functions[l->nfunctions++] = fn;
        } else {
            err = skip(r, wire);
        }
        if (err != 0)
            return err;
    }
    return 0;
}

static int read_mapping(struct reader *r, struct decoded_mapping *m)
{
    memset(m, 0, sizeof *m);
    while (r->p < r->end) {
        int field, wire;
        uint64_t v;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        if (field >= M_ID && field <= M_FILENAME && wire == WIRE_VARINT) {
            if (read_varint(r, &v) != 0)
                return -EINVAL;
            switch (field) {
            case M_ID: m->id = v; break;
            case M_START: m->start = v; break;
            case M_LIMIT: m->limit = v; break;
            case M_OFFSET: m->offset = v; break;
            default: m->filename = (int64_t)v; break;
            }
        } else if (skip(r, wire) != 0) {
            return -EINVAL;
        }
    }
    return 0;
}

static int read_function(struct reader *r, struct decoded_function *f)
{
    memset(f, 0, sizeof *f);
    while (r->p < r->end) {
        int field, wire;
        uint64_t v;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        if ((field == F_ID || field == F_NAME) && wire == WIRE_VARINT) {
            if (read_varint(r, &v) != 0)
                return -EINVAL;
            if (field == F_ID)
                f->id = v;
            else
                f->name = (int64_t)v;
        } else if (skip(r, wire) != 0) {
            return -EINVAL;
        }
    }
    return 0;
}

static int by_location_id(const void *a, const void *b)
{
    uint64_t x = ((const struct decoded_location *)a)->id;
    uint64_t y = ((const struct decoded_location *)b)->id;
    return x < y ? -1 : x > y;
}

static int by_function_id(const void *a, const void *b)
{
    uint64_t x = ((const struct decoded_function *)a)->id;
    uint64_t y = ((const struct decoded_function *)b)->id;
    return x < y ? -1 : x > y;
}

/* Every string index the reader kept must be inside the table. */
static int check_strings(const struct decoded_profile *p)
{
    size_t n = p->nstrings;
    for (size_t i = 0; i < p->ntypes; i++)
        if ((uint64_t)p->types[i].type >= n || (uint64_t)p->types[i].unit >= n)
            return -EINVAL;
    for (size_t i = 0; i < p->nfunctions; i++)
        if ((uint64_t)p->functions[i].name >= n)
            return -EINVAL;
    for (size_t i = 0; i < p->nmappings; i++)
        if ((uint64_t)p->mappings[i].filename >= n)
            return -EINVAL;
    if ((uint64_t)p->default_sample_type >= n && p->default_sample_type != 0)
        return -EINVAL;
    return 0;
}

static int read_profile(struct reader *r, struct decoded_profile *p)
{
    size_t scap = 0, tcap = 0, smcap = 0, mcap = 0, lcap = 0, fcap = 0;
    while (r->p < r->end) {
        int field, wire, err = 0;
        struct reader sub;
        uint64_t v;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        if (wire == WIRE_LEN &&
            (field == P_SAMPLE_TYPE || field == P_SAMPLE ||
             field == P_MAPPING || field == P_LOCATION ||
             field == P_FUNCTION || field == P_STRING_TABLE)) {
            if (read_len(r, &sub) != 0)
                return -EINVAL;
            switch (field) {
            case P_SAMPLE_TYPE:
                err = grow((void **)&p->types, &tcap, p->ntypes,
                           sizeof *p->types);
                if (err == 0)
                    err = read_value_type(&sub, &p->types[p->ntypes++]);
                break;
            case P_SAMPLE:
                err = grow((void **)&p->samples, &smcap, p->nsamples,
                           sizeof *p->samples);
                if (err == 0)
                    err = read_sample(&sub, &p->samples[p->nsamples++]);
                break;
            case P_MAPPING:
                err = grow((void **)&p->mappings, &mcap, p->nmappings,
                           sizeof *p->mappings);
                if (err == 0)
                    err = read_mapping(&sub, &p->mappings[p->nmappings++]);
                break;
            case P_LOCATION:
                err = grow((void **)&p->locations, &lcap, p->nlocations,
                           sizeof *p->locations);
                if (err == 0)
                    err = read_location(&sub, &p->locations[p->nlocations++]);
                break;
            case P_FUNCTION:
                err = grow((void **)&p->functions, &fcap, p->nfunctions,
                           sizeof *p->functions);
                if (err == 0)
                    err = read_function(&sub, &p->functions[p->nfunctions++]);
                break;
            case P_STRING_TABLE: {
                size_t len = (size_t)(sub.end - sub.p);
                char *s = malloc(len + 1);
                if (!s || grow((void **)&p->strings, &scap, p->nstrings,
                               sizeof *p->strings) != 0) {
                    free(s);
                    return -ENOMEM;
                }
                memcpy(s, sub.p, len);
                s[len] = '\0';
                p->strings[p->nstrings++] = s;
                break;
            }
            }
        } else if ((field == P_DEFAULT_SAMPLE_TYPE ||
                    field == P_DURATION_NANOS) &&
                   wire == WIRE_VARINT) {
            err = read_varint(r, &v);
            if (field == P_DEFAULT_SAMPLE_TYPE)
                p->default_sample_type = (int64_t)v;
            else
                p->duration_nanos = (int64_t)v;
        } else {
            err = skip(r, wire);
        }
        if (err != 0)
            return err;
    }
    return 0;
}

int decoded_profile_read(const void *data, size_t n,
                         struct decoded_profile *out)
{
    memset(out, 0, sizeof *out);
    struct reader r = {data, (const uint8_t *)data + n};
    int err = read_profile(&r, out);
    if (err == 0 && out->nstrings == 0) {
        /* An empty message is a valid, empty profile: give it its "". */
        out->strings = malloc(sizeof *out->strings);
        if (out->strings && (out->strings[0] = calloc(1, 1)) != NULL)
            out->nstrings = 1;
        else
            err = -ENOMEM;
    }
    if (err == 0)
        err = check_strings(out);
    if (err != 0) {
        decoded_profile_free(out);
        return err;
    }
    if (out->nlocations > 1)
        qsort(out->locations, out->nlocations, sizeof *out->locations,
              by_location_id);
    if (out->nfunctions > 1)
        qsort(out->functions, out->nfunctions, sizeof *out->functions,
              by_function_id);
    return 0;
}

void decoded_profile_free(struct decoded_profile *p)
{
    for (size_t i = 0; i < p->nstrings; i++)
        free(p->strings[i]);
    free(p->strings);
    free(p->types);
    for (size_t i = 0; i < p->nsamples; i++) {
        free(p->samples[i].locations);
        free(p->samples[i].values);
    }
    free(p->samples);
    for (size_t i = 0; i < p->nlocations; i++)
        free(p->locations[i].functions);
    free(p->locations);
    free(p->functions);
    free(p->mappings);
    memset(p, 0, sizeof *p);
}

const char *decoded_string(const struct decoded_profile *p, int64_t i)
{
    if (i < 0 || (uint64_t)i >= p->nstrings)
        return "";
    return p->strings[i];
}

int decoded_sample_index(const struct decoded_profile *p, const char *want)
{
    if (p->ntypes == 0)
        return -1;
    if (want && want[0]) {
        /* pprof accepts a number as an index, as well as a type name. */
        char *end;
        long i = strtol(want, &end, 10);
        if (*end == '\0' && end != want)
            return i >= 0 && (size_t)i < p->ntypes ? (int)i : -1;
        for (size_t t = 0; t < p->ntypes; t++)
            if (strcmp(decoded_string(p, p->types[t].type), want) == 0)
                return (int)t;
        return -1;
    }
    if (p->default_sample_type != 0) {
        const char *def = decoded_string(p, p->default_sample_type);
        for (size_t t = 0; t < p->ntypes; t++)
            if (strcmp(decoded_string(p, p->types[t].type), def) == 0)
                return (int)t;
    }
    return (int)p->ntypes - 1;
}

int64_t decoded_total(const struct decoded_profile *p, int index)
{
    int64_t total = 0;
    for (size_t i = 0; i < p->nsamples; i++)
        if (index >= 0 && (size_t)index < p->samples[i].nvalues)
            total += p->samples[i].values[index];
    return total;
}
