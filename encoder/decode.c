/*
 * decode.c reads a profile.proto message back: the sample types, samples
 * (with their labels), mappings (range, offset, file, build id), locations
 * (with their mapping and the function and line of each line), functions,
 * string table, default sample type, time, duration and period; every other
 * field is skipped by its wire type. It is the agent's reader of its own
 * profiles (flame graphs, the OTLP form), entered only
 * from HTTP threads, never from a signal
 * handler or an interposed call.
 *
 * It must never read outside the buffer or trust an index: every length
 * is checked against what is left, every string index against the table,
 * and a malformed message gives -EINVAL with nothing left allocated.
 */
#include "agent/core/array.h"
#include "encoder/flamegraph.h"
#include "encoder/profile_fields.h"
#include "agent/core/real.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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
    case PB_WIRE_VARINT: return read_varint(r, &v);
    case PB_WIRE_LEN: return read_len(r, &sub);
    case PB_WIRE_64:
        if (r->end - r->p < 8)
            return -EINVAL;
        r->p += 8;
        return 0;
    case PB_WIRE_32:
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
    return array_reserve(arr, cap, n + 1, el, 16);
}

/* A repeated scalar (uint64 or int64), packed or not, appended to *arr. */
static int read_repeated(struct reader *r, int wire, uint64_t **arr,
                         size_t *n, size_t *cap)
{
    if (wire == PB_WIRE_VARINT) {
        uint64_t v;
        if (read_varint(r, &v) != 0)
            return -EINVAL;
        if (grow((void **)arr, cap, *n, sizeof **arr) != 0)
            return -ENOMEM;
        (*arr)[(*n)++] = v;
        return 0;
    }
    if (wire != PB_WIRE_LEN)
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

/* Reads a message whose fields 1..n the reader keeps are varints into
 * v[field - 1] (0 when absent), skipping every other field. */
static int read_scalars(struct reader *r, uint64_t *v, int n)
{
    memset(v, 0, (size_t)n * sizeof *v);
    while (r->p < r->end) {
        int field, wire;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        if (field >= 1 && field <= n && wire == PB_WIRE_VARINT) {
            if (read_varint(r, &v[field - 1]) != 0)
                return -EINVAL;
        } else if (skip(r, wire) != 0) {
            return -EINVAL;
        }
    }
    return 0;
}

/* One label of a sample: key, str, num, num_unit (fields 1..4). */
static int read_label(struct reader *r, struct decoded_sample *s, size_t *cap)
{
    struct reader sub;
    uint64_t v[LABEL_F_NUM_UNIT];
    if (read_len(r, &sub) != 0 || read_scalars(&sub, v, LABEL_F_NUM_UNIT) != 0)
        return -EINVAL;
    if (grow((void **)&s->labels, cap, s->nlabels, sizeof *s->labels) != 0)
        return -ENOMEM;
    s->labels[s->nlabels++] = (struct decoded_label){
        (int64_t)v[0], (int64_t)v[1], (int64_t)v[2], (int64_t)v[3]};
    return 0;
}

static int read_sample(struct reader *r, void *out)
{
    struct decoded_sample *s = out;
    size_t lcap = 0, vcap = 0, bcap = 0;
    memset(s, 0, sizeof *s);
    while (r->p < r->end) {
        int field, wire, err;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        if (field == SAMPLE_F_LOCATION_ID)
            err = read_repeated(r, wire, &s->locations, &s->nlocations, &lcap);
        else if (field == SAMPLE_F_VALUE)
            err = read_repeated(r, wire, (uint64_t **)&s->values, &s->nvalues,
                                &vcap);
        else if (field == SAMPLE_F_LABEL && wire == PB_WIRE_LEN)
            err = read_label(r, s, &bcap);
        else
            err = skip(r, wire);
        if (err != 0)
            return err;
    }
    return 0;
}

static int read_location(struct reader *r, void *out)
{
    struct decoded_location *l = out;
    size_t cap = 0, lcap = 0;
    memset(l, 0, sizeof *l);
    while (r->p < r->end) {
        int field, wire, err = 0;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        if (field == LOCATION_F_ID && wire == PB_WIRE_VARINT) {
            err = read_varint(r, &l->id);
        } else if (field == LOCATION_F_ADDRESS && wire == PB_WIRE_VARINT) {
            err = read_varint(r, &l->address);
        } else if (field == LOCATION_F_MAPPING_ID && wire == PB_WIRE_VARINT) {
            err = read_varint(r, &l->mapping_id);
        } else if (field == LOCATION_F_LINE && wire == PB_WIRE_LEN) {
            struct reader line;
            uint64_t fn = 0, ln = 0;
            if (read_len(r, &line) != 0)
                return -EINVAL;
            while (line.p < line.end) {
                int lf, lw;
                if (read_tag(&line, &lf, &lw) != 0)
                    return -EINVAL;
                if (lf == LINE_F_FUNCTION_ID && lw == PB_WIRE_VARINT)
                    err = read_varint(&line, &fn);
                else if (lf == LINE_F_LINE && lw == PB_WIRE_VARINT)
                    err = read_varint(&line, &ln);
                else
                    err = skip(&line, lw);
                if (err != 0)
                    return -EINVAL;
            }
            err = grow((void **)&l->functions, &cap, l->nfunctions,
                       sizeof *l->functions);
            if (err == 0)
                err = grow((void **)&l->lines, &lcap, l->nfunctions,
                           sizeof *l->lines);
            if (err == 0) {
                l->lines[l->nfunctions] = (int64_t)ln;
                l->functions[l->nfunctions++] = fn;
            }
        } else {
            err = skip(r, wire);
        }
        if (err != 0)
            return err;
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
        if ((uint64_t)p->functions[i].name >= n ||
            (uint64_t)p->functions[i].system_name >= n ||
            (uint64_t)p->functions[i].filename >= n)
            return -EINVAL;
    for (size_t i = 0; i < p->nmappings; i++)
        if ((uint64_t)p->mappings[i].filename >= n ||
            (uint64_t)p->mappings[i].build_id >= n)
            return -EINVAL;
    for (size_t i = 0; i < p->nsamples; i++)
        for (size_t j = 0; j < p->samples[i].nlabels; j++) {
            const struct decoded_label *b = &p->samples[i].labels[j];
            if ((uint64_t)b->key >= n || (uint64_t)b->str >= n ||
                (uint64_t)b->num_unit >= n)
                return -EINVAL;
        }
    if ((uint64_t)p->period_type.type >= n ||
        (uint64_t)p->period_type.unit >= n)
        return -EINVAL;
    if ((uint64_t)p->default_sample_type >= n && p->default_sample_type != 0)
        return -EINVAL;
    return 0;
}

/* The repeated messages the reader keeps: the field, where its array and
 * count live in struct decoded_profile, the size of one, and either its
 * reader or, for a message of varint fields 1..nflat only, where each of
 * them goes in the element (64 bits each; a mapping has the most). */
static const struct repeated {
    int field;
    size_t array, count, size;
    int (*read)(struct reader *r, void *out);
    int nflat;
    size_t flat[MAPPING_F_BUILD_ID];
} repeated[] = {
#define AT(type, member) offsetof(struct type, member)
#define ELEMENT(field, array, count)                                           \
    field, offsetof(struct decoded_profile, array),                            \
        offsetof(struct decoded_profile, count),                               \
        sizeof *((struct decoded_profile *)0)->array
    {ELEMENT(PROFILE_F_SAMPLE_TYPE, types, ntypes), NULL, VALUETYPE_F_UNIT,
     {AT(decoded_type, type), AT(decoded_type, unit)}},
    {ELEMENT(PROFILE_F_SAMPLE, samples, nsamples), read_sample, 0, {0}},
    {ELEMENT(PROFILE_F_MAPPING, mappings, nmappings), NULL, MAPPING_F_BUILD_ID,
     {AT(decoded_mapping, id), AT(decoded_mapping, start),
      AT(decoded_mapping, limit), AT(decoded_mapping, offset),
      AT(decoded_mapping, filename), AT(decoded_mapping, build_id)}},
    {ELEMENT(PROFILE_F_LOCATION, locations, nlocations), read_location, 0,
     {0}},
    {ELEMENT(PROFILE_F_FUNCTION, functions, nfunctions), NULL,
     FUNCTION_F_START_LINE,
     {AT(decoded_function, id), AT(decoded_function, name),
      AT(decoded_function, system_name), AT(decoded_function, filename),
      AT(decoded_function, start_line)}},
#undef ELEMENT
#undef AT
};
#define NREPEATED (sizeof repeated / sizeof repeated[0])

/* Reads one more element of a repeated message into its array (counted
 * before it is read, so that a failure frees what it took). */
static int read_repeated_message(struct reader *sub, const struct repeated *m,
                                 size_t *cap, struct decoded_profile *p)
{
    void **arr = (void **)((char *)p + m->array);
    size_t *n = (size_t *)((char *)p + m->count);
    if (grow(arr, cap, *n, m->size) != 0)
        return -ENOMEM;
    char *el = (char *)*arr + (*n)++ * m->size;
    if (m->read)
        return m->read(sub, el);
    uint64_t v[MAPPING_F_BUILD_ID];
    memset(el, 0, m->size);
    if (read_scalars(sub, v, m->nflat) != 0)
        return -EINVAL;
    for (int i = 0; i < m->nflat; i++)
        memcpy(el + m->flat[i], &v[i], sizeof v[i]);
    return 0;
}

static int read_profile(struct reader *r, struct decoded_profile *p)
{
    size_t scap = 0, caps[NREPEATED] = {0};
    while (r->p < r->end) {
        int field, wire, err = 0;
        struct reader sub;
        uint64_t v;
        if (read_tag(r, &field, &wire) != 0)
            return -EINVAL;
        size_t k = 0;
        while (k < NREPEATED && repeated[k].field != field)
            k++;
        if (wire == PB_WIRE_LEN && k < NREPEATED) {
            if (read_len(r, &sub) != 0)
                return -EINVAL;
            err = read_repeated_message(&sub, &repeated[k], &caps[k], p);
        } else if (wire == PB_WIRE_LEN && field == PROFILE_F_STRING_TABLE) {
            if (read_len(r, &sub) != 0)
                return -EINVAL;
            size_t len = (size_t)(sub.end - sub.p);
            char *s = real_malloc(len + 1);
            if (!s || grow((void **)&p->strings, &scap, p->nstrings,
                           sizeof *p->strings) != 0) {
                real_free(s);
                return -ENOMEM;
            }
            memcpy(s, sub.p, len);
            s[len] = '\0';
            p->strings[p->nstrings++] = s;
        } else if (field == PROFILE_F_PERIOD_TYPE && wire == PB_WIRE_LEN) {
            uint64_t t[VALUETYPE_F_UNIT];
            if (read_len(r, &sub) != 0 ||
                read_scalars(&sub, t, VALUETYPE_F_UNIT) != 0)
                return -EINVAL;
            p->period_type.type = (int64_t)t[0];
            p->period_type.unit = (int64_t)t[1];
        } else if (wire == PB_WIRE_VARINT) {
            err = read_varint(r, &v);
            if (field == PROFILE_F_DEFAULT_SAMPLE_TYPE)
                p->default_sample_type = (int64_t)v;
            else if (field == PROFILE_F_DURATION_NANOS)
                p->duration_nanos = (int64_t)v;
            else if (field == PROFILE_F_TIME_NANOS)
                p->time_nanos = (int64_t)v;
            else if (field == PROFILE_F_PERIOD)
                p->period = (int64_t)v;
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
        out->strings = real_malloc(sizeof *out->strings);
        if (out->strings && (out->strings[0] = real_calloc(1, 1)) != NULL)
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
        real_free(p->strings[i]);
    real_free(p->strings);
    real_free(p->types);
    for (size_t i = 0; i < p->nsamples; i++) {
        real_free(p->samples[i].locations);
        real_free(p->samples[i].values);
        real_free(p->samples[i].labels);
    }
    real_free(p->samples);
    for (size_t i = 0; i < p->nlocations; i++) {
        real_free(p->locations[i].functions);
        real_free(p->locations[i].lines);
    }
    real_free(p->locations);
    real_free(p->functions);
    real_free(p->mappings);
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
