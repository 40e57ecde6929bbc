/*
 * profile.c builds a perftools.profiles.Profile message (profile.proto): the
 * deduplicated string table, mappings, functions, locations and samples, and
 * the header fields. Strings, functions and locations are found again through
 * open-addressing hash tables, so building and serializing stay O(n) for
 * hundreds of thousands of samples. Locations and samples are encoded into
 * their own buffers as they are added (nothing later changes them); the
 * pieces are concatenated by profile_serialize().
 *
 * It is entered only from the agent's own threads (HTTP workers) while they
 * answer a request, one thread per profile; it never runs in a signal
 * handler. All memory comes from plain malloc/realloc/free, which reach the
 * host allocator directly on those threads. An allocation failure is
 * remembered and reported once, by profile_serialize(), as -ENOMEM.
 */
#include "encoder/encoder.h"
#include "encoder/profile_fields.h"
#include "agent/core/array.h"
#include "agent/core/real.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct str_ent {
    size_t off; /* into str_arena */
    size_t len; /* without the NUL */
};

struct value_type {
    int64_t type;
    int64_t unit;
};

struct mapping {
    uint64_t start, limit, offset;
    int64_t filename, build_id;
    int flags;
};

struct function {
    int64_t name, system_name, filename, start_line;
};

struct profile {
    int oom;

    /* String table: NUL-terminated strings packed into one arena, found by
     * offset (the arena moves when it grows). */
    struct pbuf str_arena;
    struct str_ent *strs;
    size_t nstr, str_cap;
    struct htab str_index;

    struct value_type *sample_types;
    size_t nsample_types, sample_types_cap;
    int has_period;
    struct value_type period_type;
    int64_t period;
    int64_t time_nanos, duration_nanos;
    int64_t default_sample_type;
    int64_t drop_frames;
    int64_t *comments;
    size_t ncomments, comments_cap;

    struct mapping *mappings;
    size_t nmappings, mappings_cap;

    struct function *functions;
    size_t nfunctions, functions_cap;
    struct htab function_index;

    /* Location i has id i + 1; only its address is kept for lookups, the
     * rest is encoded straight into `locations`. */
    uint64_t *loc_addr;
    size_t nlocs, loc_cap;
    struct htab loc_index;
    struct pbuf locations;

    struct pbuf samples;
};

/* ---- small helpers ------------------------------------------------------ */

/* Grows *arr (elements of `size` bytes) so that one more fits; 0 or -1. */
static int grow_array(struct profile *p, void **arr, size_t *cap, size_t n,
                      size_t size)
{
    if (array_reserve(arr, cap, n + 1, size, 16) != 0) {
        p->oom = 1;
        return -1;
    }
    return 0;
}

#define GROW(p, arr, cap, n)                                                   \
    grow_array((p), (void **)&(arr), &(cap), (n), sizeof *(arr))

/* Appends the element at value to an array of *n, growing it; returns its
 * index, or SIZE_MAX when out of memory. */
static size_t append(struct profile *p, void **arr, size_t *cap, size_t *n,
                     size_t size, const void *value)
{
    if (grow_array(p, arr, cap, *n, size) != 0)
        return SIZE_MAX;
    memcpy((char *)*arr + *n * size, value, size);
    return (*n)++;
}

#define APPEND(p, arr, cap, n, value)                                          \
    append((p), (void **)&(arr), &(cap), &(n), sizeof *(arr), (value))

/* Appends value to an array, as APPEND, and enters its index in t at the
 * empty slot sl found for hash (none when sl is NULL); the entry's id
 * (index + 1), or 0 when out of memory. */
static uint64_t add_indexed(struct profile *p, struct htab *t,
                            struct htab_slot *sl, uint64_t hash, void **arr,
                            size_t *cap, size_t *n, size_t size,
                            const void *value)
{
    size_t idx = append(p, arr, cap, n, size, value);
    if (idx == SIZE_MAX)
        return 0;
    if (sl)
        htab_set(t, sl, hash, idx);
    return idx + 1;
}

#define ADD_INDEXED(p, t, sl, hash, arr, cap, n, value)                        \
    add_indexed((p), (t), (sl), (hash), (void **)&(arr), &(cap), &(n),         \
                sizeof *(arr), (value))

/* The id (index + 1) of the entry of t equal to key, or 0 with *slot set
 * to where a new one goes (NULL after marking the profile out of
 * memory). */
static uint64_t lookup(struct profile *p, struct htab *t, uint64_t hash,
                       htab_eq_fn eq, const void *key, struct htab_slot **slot)
{
    return htab_lookup(t, hash, eq, p, key, slot, &p->oom);
}

/* ---- lifecycle ------------------------------------------------------------- */

struct profile *profile_new(void)
{
    struct profile *p = real_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    /* string_table[0] must be "" in every profile. It never enters the
     * index: profile_string answers 0 for "" before hashing. */
    pbuf_append(&p->str_arena, "", 1);
    if (GROW(p, p->strs, p->str_cap, 0) != 0 || p->str_arena.oom) {
        profile_free(p);
        return NULL;
    }
    p->strs[0].off = 0;
    p->strs[0].len = 0;
    p->nstr = 1;
    return p;
}

struct profile *profile_timed(const char *clock, int64_t period_ns,
                              int64_t time_nanos, int64_t duration_nanos,
                              const char *comment)
{
    struct profile *p = profile_new();
    if (!p)
        return NULL;
    profile_sample_type(p, "samples", "count");
    profile_sample_type(p, clock, "nanoseconds");
    profile_period(p, clock, "nanoseconds", period_ns);
    profile_time(p, time_nanos, duration_nanos);
    if (comment && comment[0])
        profile_comment(p, comment);
    return p;
}

void profile_free(struct profile *p)
{
    if (!p)
        return;
    pbuf_free(&p->str_arena);
    real_free(p->strs);
    htab_free(&p->str_index);
    real_free(p->sample_types);
    real_free(p->comments);
    real_free(p->mappings);
    real_free(p->functions);
    htab_free(&p->function_index);
    real_free(p->loc_addr);
    htab_free(&p->loc_index);
    pbuf_free(&p->locations);
    pbuf_free(&p->samples);
    real_free(p);
}

/* ---- strings --------------------------------------------------------------- */

struct str_key {
    const char *s;
    size_t n;
};

static int str_eq(const void *ctx, size_t idx, const void *key)
{
    const struct profile *p = ctx;
    const struct str_key *k = key;
    return p->strs[idx].len == k->n &&
           memcmp(p->str_arena.data + p->strs[idx].off, k->s, k->n) == 0;
}

int64_t profile_string(struct profile *p, const char *s)
{
    if (!s || !*s)
        return 0;
    struct str_key k = {s, strlen(s)};
    uint64_t h = htab_hash_bytes(s, k.n, 0);
    struct htab_slot *sl;
    uint64_t found = lookup(p, &p->str_index, h, str_eq, &k, &sl);
    if (found || !sl)
        return found ? (int64_t)(found - 1) : 0;

    if (GROW(p, p->strs, p->str_cap, p->nstr) != 0)
        return 0;
    size_t off = p->str_arena.len;
    pbuf_append(&p->str_arena, s, k.n + 1);
    if (p->str_arena.oom) {
        p->oom = 1;
        return 0;
    }
    size_t idx = p->nstr++;
    p->strs[idx].off = off;
    p->strs[idx].len = k.n;
    htab_set(&p->str_index, sl, h, idx);
    return (int64_t)idx;
}

/* ---- header fields --------------------------------------------------------- */

void profile_sample_type(struct profile *p, const char *type, const char *unit)
{
    if (GROW(p, p->sample_types, p->sample_types_cap, p->nsample_types) != 0)
        return;
    struct value_type vt = {profile_string(p, type), profile_string(p, unit)};
    p->sample_types[p->nsample_types++] = vt;
}

void profile_period(struct profile *p, const char *type, const char *unit,
                    int64_t period)
{
    p->has_period = 1;
    p->period_type.type = profile_string(p, type);
    p->period_type.unit = profile_string(p, unit);
    p->period = period;
}

void profile_time(struct profile *p, int64_t time_nanos,
                  int64_t duration_nanos)
{
    /* Stored, not appended: time_nanos must appear once in the message
     * (pprof reads a second one as concatenated profiles). */
    p->time_nanos = time_nanos;
    p->duration_nanos = duration_nanos;
}

void profile_default_sample_type(struct profile *p, const char *type)
{
    p->default_sample_type = profile_string(p, type);
}

void profile_comment(struct profile *p, const char *text)
{
    if (GROW(p, p->comments, p->comments_cap, p->ncomments) != 0)
        return;
    p->comments[p->ncomments++] = profile_string(p, text);
}

void profile_drop_frames(struct profile *p, const char *regex)
{
    p->drop_frames = profile_string(p, regex);
}

/* ---- mappings -------------------------------------------------------------- */

uint64_t profile_mapping(struct profile *p, uint64_t start, uint64_t limit,
                         uint64_t offset, const char *filename,
                         const char *build_id)
{
    if (GROW(p, p->mappings, p->mappings_cap, p->nmappings) != 0)
        return 0;
    struct mapping m = {
        .start = start,
        .limit = limit,
        .offset = offset,
        .filename = profile_string(p, filename),
        .build_id = profile_string(p, build_id),
        .flags = 0,
    };
    p->mappings[p->nmappings++] = m;
    return p->nmappings;
}

void profile_mapping_flags(struct profile *p, uint64_t mapping_id, int flags)
{
    if (mapping_id == 0 || mapping_id > p->nmappings)
        return;
    p->mappings[mapping_id - 1].flags |= flags;
}

/* ---- functions ------------------------------------------------------------- */

static int function_eq(const void *ctx, size_t idx, const void *key)
{
    const struct profile *p = ctx;
    const struct function *a = &p->functions[idx], *b = key;
    return a->name == b->name && a->system_name == b->system_name &&
           a->filename == b->filename && a->start_line == b->start_line;
}

uint64_t profile_function(struct profile *p, const char *name,
                          const char *system_name, const char *filename,
                          int64_t start_line)
{
    /* Equal strings intern to equal indexes, so comparing the indexes is
     * comparing the strings. */
    struct function f = {
        .name = profile_string(p, name),
        .system_name = profile_string(p, system_name),
        .filename = profile_string(p, filename),
        .start_line = start_line,
    };
    uint64_t h = hash_splitmix64((uint64_t)f.name);
    h = hash_splitmix64(h ^ (uint64_t)f.system_name);
    h = hash_splitmix64(h ^ (uint64_t)f.filename);
    h = hash_splitmix64(h ^ (uint64_t)f.start_line);
    struct htab_slot *sl;
    uint64_t found = lookup(p, &p->function_index, h, function_eq, &f, &sl);
    if (found || !sl)
        return found;
    return ADD_INDEXED(p, &p->function_index, sl, h, p->functions,
                       p->functions_cap, p->nfunctions, &f);
}

/* ---- locations ------------------------------------------------------------- */

static int loc_eq(const void *ctx, size_t idx, const void *key)
{
    const struct profile *p = ctx;
    return p->loc_addr[idx] == *(const uint64_t *)key;
}

uint64_t profile_find_location(struct profile *p, uint64_t address)
{
    if (address == 0)
        return 0;
    struct htab_slot *sl =
        htab_find(&p->loc_index, hash_splitmix64(address), loc_eq, p, &address);
    return sl && sl->idx1 ? sl->idx1 : 0;
}

uint64_t profile_location(struct profile *p, uint64_t mapping_id,
                          uint64_t address, const struct profile_line *lines,
                          size_t nlines)
{
    struct htab_slot *sl = NULL;
    uint64_t h = hash_splitmix64(address);
    /* Address 0 marks a pseudo frame (e.g. lost samples): each one is its
     * own location, so it never enters the index. */
    if (address != 0) {
        uint64_t found = lookup(p, &p->loc_index, h, loc_eq, &address, &sl);
        if (found || !sl)
            return found;
    }
    uint64_t id = ADD_INDEXED(p, &p->loc_index, sl, h, p->loc_addr,
                              p->loc_cap, p->nlocs, &address);
    if (id == 0)
        return 0;
    struct pbuf *b = &p->locations;
    uint64_t v[LOCATION_F_ADDRESS] = {id, mapping_id, address};
    size_t m = pb_begin(b, PROFILE_F_LOCATION);
    pb_varints(b, LOCATION_F_ID, v, LOCATION_F_ADDRESS);
    for (size_t i = 0; i < nlines; i++) {
        uint64_t lv[LINE_F_LINE] = {lines[i].function_id,
                                    (uint64_t)lines[i].line};
        pb_varints_message(b, LOCATION_F_LINE, lv, LINE_F_LINE);
    }
    pb_end(b, m);
    return id;
}

/* ---- samples --------------------------------------------------------------- */

void profile_sample(struct profile *p, const uint64_t *location_ids,
                    size_t nlocs, const int64_t *values, size_t nvalues,
                    const struct profile_label *labels, size_t nlabels)
{
    /* Label strings are interned while the message is open: that only
     * touches the string table, never this buffer, so the mark stays valid.
     * The value count is the caller's contract (one per sample type); pprof
     * rejects a mismatch when it reads the profile. */
    struct pbuf *b = &p->samples;
    size_t m = pb_begin(b, PROFILE_F_SAMPLE);
    pb_packed_uint64(b, SAMPLE_F_LOCATION_ID, location_ids, nlocs);
    pb_packed_int64(b, SAMPLE_F_VALUE, values, nvalues);
    for (size_t i = 0; i < nlabels; i++) {
        const struct profile_label *l = &labels[i];
        size_t lm = pb_begin(b, SAMPLE_F_LABEL);
        pb_int64(b, LABEL_F_KEY, profile_string(p, l->key));
        if (l->str) {
            pb_int64(b, LABEL_F_STR, profile_string(p, l->str));
        } else {
            pb_int64(b, LABEL_F_NUM, l->num);
            pb_int64(b, LABEL_F_NUM_UNIT, profile_string(p, l->num_unit));
        }
        pb_end(b, lm);
    }
    pb_end(b, m);
}

/* ---- serialization --------------------------------------------------------- */

static void put_value_type(struct pbuf *b, int field,
                           const struct value_type *vt)
{
    uint64_t v[VALUETYPE_F_UNIT] = {(uint64_t)vt->type, (uint64_t)vt->unit};
    pb_varints_message(b, field, v, VALUETYPE_F_UNIT);
}

int profile_serialize(struct profile *p, struct pbuf *out)
{
    if (p->oom || p->str_arena.oom || p->locations.oom || p->samples.oom)
        return -ENOMEM;

    /* The order follows Go's writer: the bulk first, the string table after
     * everything that refers to it, then the scalar header fields. */
    for (size_t i = 0; i < p->nsample_types; i++)
        put_value_type(out, PROFILE_F_SAMPLE_TYPE, &p->sample_types[i]);

    pbuf_append(out, p->samples.data, p->samples.len);

    /* Mapping and Function: every field a varint, numbered 1..n in the
     * order of profile.proto. */
    for (size_t i = 0; i < p->nmappings; i++) {
        const struct mapping *mp = &p->mappings[i];
        uint64_t v[MAPPING_F_HAS_INLINE_FRAMES] = {
            i + 1,
            mp->start,
            mp->limit,
            mp->offset,
            (uint64_t)mp->filename,
            (uint64_t)mp->build_id,
            (mp->flags & PROFILE_HAS_FUNCTIONS) != 0,
            (mp->flags & PROFILE_HAS_FILENAMES) != 0,
            (mp->flags & PROFILE_HAS_LINE_NUMBERS) != 0,
            (mp->flags & PROFILE_HAS_INLINE_FRAMES) != 0,
        };
        pb_varints_message(out, PROFILE_F_MAPPING, v,
                           MAPPING_F_HAS_INLINE_FRAMES);
    }

    pbuf_append(out, p->locations.data, p->locations.len);

    for (size_t i = 0; i < p->nfunctions; i++) {
        const struct function *f = &p->functions[i];
        uint64_t v[FUNCTION_F_START_LINE] = {
            i + 1,
            (uint64_t)f->name,
            (uint64_t)f->system_name,
            (uint64_t)f->filename,
            (uint64_t)f->start_line,
        };
        pb_varints_message(out, PROFILE_F_FUNCTION, v, FUNCTION_F_START_LINE);
    }

    /* pb_bytes writes empty strings too, so string_table[0] == "" is
     * always present. */
    for (size_t i = 0; i < p->nstr; i++)
        pb_bytes(out, PROFILE_F_STRING_TABLE,
                 p->str_arena.data + p->strs[i].off, p->strs[i].len);

    pb_int64(out, PROFILE_F_DROP_FRAMES, p->drop_frames);
    pb_int64(out, PROFILE_F_TIME_NANOS, p->time_nanos);
    pb_int64(out, PROFILE_F_DURATION_NANOS, p->duration_nanos);
    if (p->has_period) {
        put_value_type(out, PROFILE_F_PERIOD_TYPE, &p->period_type);
        pb_int64(out, PROFILE_F_PERIOD, p->period);
    }
    pb_packed_int64(out, PROFILE_F_COMMENT, p->comments, p->ncomments);
    pb_int64(out, PROFILE_F_DEFAULT_SAMPLE_TYPE, p->default_sample_type);

    return out->oom ? -ENOMEM : 0;
}

int profile_write_gzip(struct profile *p, struct pbuf *out)
{
    struct pbuf raw = {0};
    int rc = profile_serialize(p, &raw);
    if (rc == 0)
        rc = gzip_compress(raw.data, raw.len, out);
    pbuf_free(&raw);
    return rc;
}
