/*
 * otlp.c writes the OTLP profiles request (otlp.h) from the agent's own
 * profile.proto messages: each message is read back (decode.c), its ids
 * turned into indices of the request's shared dictionary, and each kept
 * sample type written as one Profile message at once; the dictionary is
 * written last. The field numbers are those of OTLP 1.10's
 * profiles.proto (v1development), named below.
 *
 * Runs on the push thread only; allocates with the host's malloc (the
 * thread is the agent's, so nothing here is sampled).
 */
#include "encoder/otlp.h"
#include "agent/core/real.h"

#include "agent/core/array.h"
#include "encoder/flamegraph.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- fields ------------------------------------------------------------------ */

/* One table a message, one field a line with its type, as in
 * profile_fields.h; "index" is into the dictionary's table of that kind. */

/* message ExportProfilesServiceRequest */
enum {
    REQ_RESOURCE_PROFILES = 1, /* repeated ResourceProfiles */
    REQ_DICTIONARY = 2,        /* ProfilesDictionary */
};

/* message ResourceProfiles */
enum {
    RP_RESOURCE = 1,       /* Resource */
    RP_SCOPE_PROFILES = 2, /* repeated ScopeProfiles */
};

/* message Resource */
enum {
    RES_ATTRIBUTES = 1, /* repeated KeyValue */
};

/* message ScopeProfiles */
enum {
    SP_SCOPE = 1,    /* InstrumentationScope */
    SP_PROFILES = 2, /* repeated Profile */
};

/* message InstrumentationScope */
enum {
    SCOPE_NAME = 1,    /* string */
    SCOPE_VERSION = 2, /* string */
};

/* message KeyValue */
enum {
    KV_KEY = 1,   /* string */
    KV_VALUE = 2, /* AnyValue */
};

/* message AnyValue (a oneof) */
enum {
    ANY_STRING = 1, /* string */
    ANY_INT = 3,    /* int64 */
};

/* message Profile */
enum {
    PROF_SAMPLE_TYPE = 1,     /* ValueType */
    PROF_SAMPLES = 2,         /* repeated Sample */
    PROF_TIME = 3,            /* fixed64 */
    PROF_DURATION = 4,        /* int64 */
    PROF_PERIOD_TYPE = 5,     /* ValueType */
    PROF_PERIOD = 6,          /* int64 */
    PROF_ID = 7,              /* bytes */
    PROF_ORIGINAL_FORMAT = 9, /* string */
};

/* message ValueType */
enum {
    VT_TYPE = 1, /* int32 (string index) */
    VT_UNIT = 2, /* int32 (string index) */
};

/* message Sample */
enum {
    SAMPLE_STACK = 1,  /* int32 (index) */
    SAMPLE_ATTRS = 2,  /* repeated int32 (index) */
    SAMPLE_VALUES = 4, /* repeated int64 */
};

/* message ProfilesDictionary: each table's entry 0 is its zero value. */
enum {
    DICT_MAPPINGS = 1,   /* repeated Mapping */
    DICT_LOCATIONS = 2,  /* repeated Location */
    DICT_FUNCTIONS = 3,  /* repeated Function */
    DICT_LINKS = 4,      /* repeated Link */
    DICT_STRINGS = 5,    /* repeated string */
    DICT_ATTRIBUTES = 6, /* repeated KeyValueAndUnit */
    DICT_STACKS = 7,     /* repeated Stack */
};

/* message Mapping */
enum {
    MAP_START = 1,  /* uint64 */
    MAP_LIMIT = 2,  /* uint64 */
    MAP_OFFSET = 3, /* uint64 */
    MAP_FILE = 4,   /* int32 (string index) */
    MAP_ATTRS = 5,  /* repeated int32 (index) */
};

/* message Location */
enum {
    LOC_MAPPING = 1, /* int32 (index) */
    LOC_ADDRESS = 2, /* uint64 */
    LOC_LINES = 3,   /* repeated Line */
};

/* message Line */
enum {
    LINE_FUNCTION = 1, /* int32 (index) */
    LINE_LINE = 2,     /* int64 */
};

/* message Function */
enum {
    FN_NAME = 1,        /* int32 (string index) */
    FN_SYSTEM_NAME = 2, /* int32 (string index) */
    FN_FILE = 3,        /* int32 (string index) */
    FN_START_LINE = 4,  /* int64 */
};

/* message KeyValueAndUnit */
enum {
    ATTR_KEY = 1,   /* int32 (string index) */
    ATTR_VALUE = 2, /* AnyValue */
    ATTR_UNIT = 3,  /* int32 (string index) */
};

/* message Stack */
enum {
    STACK_LOCATIONS = 1, /* repeated int32 (index) */
};

/* ---- the dictionary ---------------------------------------------------------- */

struct str_entry {
    char *s;
    size_t n;
};
struct fn_entry {
    int64_t name, system_name, file, start_line;
};
struct map_entry {
    uint64_t start, limit, offset;
    int64_t file, attr; /* attr: the build id's attribute, 0: none */
};
struct line_entry {
    int64_t function, line;
};
struct loc_entry {
    int64_t mapping;
    uint64_t address;
    size_t first, n; /* in lines */
};
struct attr_entry {
    int64_t key, str, num, unit; /* str: in values, not strings */
    int64_t is_int; /* num holds the value (64 bits: no padding) */
};
struct stack_entry_otlp {
    size_t first, n; /* in stack_locs */
};

/* A dictionary table: its entries, and the pools its entries point into
 * (the group table is first, so that an eq function finds the pools). */
struct table {
    struct group_table g;
    struct otlp_batch *b;
};

struct otlp_batch {
    struct table strings, functions, mappings, locations, attributes, stacks;
    /* Attributes' string values: written inline (AnyValue.string_value),
     * so kept apart from the string table, for their identity only. */
    struct table values;
    struct line_entry *lines;
    size_t nlines, lines_cap;
    int64_t *stack_locs;
    size_t nstack_locs, stack_locs_cap;
    struct pbuf profiles; /* Profile messages, field SP_PROFILES each */
    size_t nprofiles;
    uint64_t id_state;
    int oom;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    return hash_splitmix64(h ^ (v + HASH_GOLDEN));
}

static int str_eq(const void *ctx, size_t idx, const void *key)
{
    const struct str_entry *e = group_at(ctx, idx);
    const struct str_entry *k = key;
    return e->n == k->n && memcmp(e->s, k->s, k->n) == 0;
}

/* The index of s in table t (strings or values), added when new (-1: out
 * of memory). */
static int64_t text_of(struct otlp_batch *b, struct table *t, const char *s)
{
    struct str_entry k = {(char *)s, strlen(s)};
    int added = 0;
    struct str_entry *e = group_find_or_add(
        &t->g, htab_hash_bytes(s, k.n, 0), str_eq, &k, &added);
    if (!e) {
        b->oom = 1;
        return -1;
    }
    if (added) {
        e->s = real_malloc(k.n + 1);
        if (!e->s) {
            b->oom = 1;
            e->n = 0;
            return 0;
        }
        memcpy(e->s, s, k.n + 1);
        e->n = k.n;
    }
    return (int64_t)(e - (struct str_entry *)t->g.v);
}

static int64_t string_of(struct otlp_batch *b, const char *s)
{
    return text_of(b, &b->strings, s);
}

static int bytes_eq(const void *ctx, size_t idx, const void *key)
{
    const struct group_table *g = ctx;
    return memcmp(group_at(g, idx), key, g->size) == 0;
}

/* The index of a flat entry (compared byte for byte, padding zeroed by the
 * caller), added when new; -1 when out of memory, which fails the batch. */
static int64_t flat_of(struct table *t, const void *key)
{
    int added = 0;
    void *e = group_find_or_add(&t->g, htab_hash_bytes(key, t->g.size, 0),
                                bytes_eq, key, &added);
    if (!e) {
        t->b->oom = 1;
        return -1;
    }
    if (added)
        memcpy(e, key, t->g.size);
    return (int64_t)(((char *)e - (char *)t->g.v) / t->g.size);
}

/* Locations compare on mapping, address and their lines. */
struct loc_key {
    struct loc_entry e;
    const struct line_entry *lines;
};

static int loc_eq(const void *ctx, size_t idx, const void *key)
{
    const struct table *t = ctx;
    const struct loc_entry *e = group_at(&t->g, idx);
    const struct loc_key *k = key;
    return e->mapping == k->e.mapping && e->address == k->e.address &&
           e->n == k->e.n &&
           (k->e.n == 0 || memcmp(t->b->lines + e->first, k->lines,
                                  k->e.n * sizeof *k->lines) == 0);
}

static int64_t location_of(struct otlp_batch *b, struct loc_key *k)
{
    uint64_t h = mix(mix((uint64_t)k->e.mapping, k->e.address), k->e.n);
    if (k->e.n)
        h = mix(h, htab_hash_bytes(k->lines, k->e.n * sizeof *k->lines, 0));
    int added = 0;
    struct loc_entry *e =
        group_find_or_add(&b->locations.g, h, loc_eq, k, &added);
    if (!e)
        return -1;
    if (added) {
        *e = k->e;
        e->first = b->nlines;
        if (ARRAY_RESERVE(b->lines, b->lines_cap, b->nlines + k->e.n, 64) !=
            0) {
            b->oom = 1;
            e->n = 0;
        } else {
            if (k->e.n) /* both may be NULL then */
                memcpy(b->lines + b->nlines, k->lines,
                       k->e.n * sizeof *k->lines);
            b->nlines += k->e.n;
        }
    }
    return (int64_t)(e - (struct loc_entry *)b->locations.g.v);
}

struct stack_key {
    const int64_t *locs;
    size_t n;
};

static int stack_eq(const void *ctx, size_t idx, const void *key)
{
    const struct table *t = ctx;
    const struct stack_entry_otlp *e = group_at(&t->g, idx);
    const struct stack_key *k = key;
    return e->n == k->n &&
           (k->n == 0 || memcmp(t->b->stack_locs + e->first, k->locs,
                                k->n * sizeof *k->locs) == 0);
}

static int64_t stack_of(struct otlp_batch *b, const int64_t *locs, size_t n)
{
    struct stack_key k = {locs, n};
    uint64_t h = n ? htab_hash_bytes(locs, n * sizeof *locs, 1) : 1;
    int added = 0;
    struct stack_entry_otlp *e =
        group_find_or_add(&b->stacks.g, h, stack_eq, &k, &added);
    if (!e)
        return -1;
    if (added) {
        e->first = b->nstack_locs;
        e->n = n;
        if (ARRAY_RESERVE(b->stack_locs, b->stack_locs_cap,
                          b->nstack_locs + n, 256) != 0) {
            b->oom = 1;
            e->n = 0;
        } else {
            if (n) /* both may be NULL then */
                memcpy(b->stack_locs + b->nstack_locs, locs, n * sizeof *locs);
            b->nstack_locs += n;
        }
    }
    return (int64_t)(e - (struct stack_entry_otlp *)b->stacks.g.v);
}

static void table_init(struct table *t, struct otlp_batch *b, size_t size)
{
    t->g = (struct group_table){.size = size};
    t->b = b;
}

struct otlp_batch *otlp_batch_new(void)
{
    struct otlp_batch *b = real_calloc(1, sizeof *b);
    if (!b)
        return NULL;
    table_init(&b->strings, b, sizeof(struct str_entry));
    table_init(&b->functions, b, sizeof(struct fn_entry));
    table_init(&b->mappings, b, sizeof(struct map_entry));
    table_init(&b->locations, b, sizeof(struct loc_entry));
    table_init(&b->attributes, b, sizeof(struct attr_entry));
    table_init(&b->stacks, b, sizeof(struct stack_entry_otlp));
    table_init(&b->values, b, sizeof(struct str_entry));
    /* Entry 0 of every table is its zero value, as the format asks. */
    struct fn_entry f = {0};
    struct map_entry m = {0};
    struct attr_entry a = {0};
    struct loc_key l = {{0}, NULL};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    b->id_state = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                  (uint64_t)(uintptr_t)b;
    if (string_of(b, "") != 0 || text_of(b, &b->values, "") != 0 || flat_of(&b->functions, &f) != 0 ||
        flat_of(&b->mappings, &m) != 0 || flat_of(&b->attributes, &a) != 0 ||
        location_of(b, &l) != 0 || stack_of(b, NULL, 0) != 0 || b->oom) {
        otlp_batch_free(b);
        return NULL;
    }
    return b;
}

void otlp_batch_free(struct otlp_batch *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->strings.g.n; i++)
        real_free(((struct str_entry *)b->strings.g.v)[i].s);
    for (size_t i = 0; i < b->values.g.n; i++)
        real_free(((struct str_entry *)b->values.g.v)[i].s);
    group_table_free(&b->strings.g);
    group_table_free(&b->values.g);
    group_table_free(&b->functions.g);
    group_table_free(&b->mappings.g);
    group_table_free(&b->locations.g);
    group_table_free(&b->attributes.g);
    group_table_free(&b->stacks.g);
    real_free(b->lines);
    real_free(b->stack_locs);
    pbuf_free(&b->profiles);
    real_free(b);
}

size_t otlp_batch_profiles(const struct otlp_batch *b)
{
    return b->nprofiles;
}

/* ---- one profile.proto message ----------------------------------------------- */

/* Ids of the message to indices of the dictionary. */
struct remap {
    const struct decoded_profile *p;
    int64_t *strings;   /* per string index */
    int64_t *mappings;  /* per mapping, in the message's order */
    int64_t *functions; /* per function, sorted by id */
    int64_t *locations; /* per location, sorted by id */
};

#define NONE ((size_t)-1)

/* The dictionary index of the message's entry i, memo[i] once known (-1:
 * not yet): add writes the entry into the dictionary on its first use and
 * returns its index (-1: out of memory). 0, the zero entry, for an entry
 * the message lacks (i == NONE) or that could not be added. */
static int64_t remapped(struct otlp_batch *b, struct remap *r, size_t i,
                        int64_t *memo,
                        int64_t (*add)(struct otlp_batch *, struct remap *,
                                       size_t))
{
    if (i == NONE)
        return 0;
    if (memo[i] < 0)
        memo[i] = add(b, r, i);
    return memo[i] < 0 ? 0 : memo[i];
}

static int64_t add_string(struct otlp_batch *b, struct remap *r, size_t i)
{
    return string_of(b, r->p->strings[i]);
}

static int64_t str_at(struct otlp_batch *b, struct remap *r, int64_t i)
{
    int known = i > 0 && (uint64_t)i < r->p->nstrings;
    return remapped(b, r, known ? (size_t)i : NONE, r->strings, add_string);
}

static int64_t attr_str(struct otlp_batch *b, const char *key,
                        const char *value)
{
    struct attr_entry a = {0};
    a.key = string_of(b, key);
    a.str = text_of(b, &b->values, value);
    return a.key < 0 || a.str < 0 ? 0 : flat_of(&b->attributes, &a);
}

/* Binary search of a sorted id: its index into out, NONE when absent. */
#define FIND_ID(arr, n, want, out)                                             \
    do {                                                                       \
        size_t lo_ = 0, hi_ = (n);                                             \
        (out) = NONE;                                                          \
        while (lo_ < hi_) {                                                    \
            size_t mid_ = (lo_ + hi_) / 2;                                     \
            if ((arr)[mid_].id == (want)) {                                    \
                (out) = mid_;                                                  \
                break;                                                         \
            }                                                                  \
            if ((arr)[mid_].id < (want))                                       \
                lo_ = mid_ + 1;                                                \
            else                                                               \
                hi_ = mid_;                                                    \
        }                                                                      \
    } while (0)

static int64_t add_mapping(struct otlp_batch *b, struct remap *r, size_t i)
{
    const struct decoded_mapping *m = &r->p->mappings[i];
    struct map_entry e = {0};
    e.start = m->start;
    e.limit = m->limit;
    e.offset = m->offset;
    e.file = str_at(b, r, m->filename);
    if (m->build_id > 0)
        e.attr = attr_str(b, "process.executable.build_id.gnu",
                          decoded_string(r->p, m->build_id));
    return flat_of(&b->mappings, &e);
}

/* Mappings are in the message's order, not sorted by id. */
static int64_t mapping_at(struct otlp_batch *b, struct remap *r, uint64_t id)
{
    const struct decoded_profile *p = r->p;
    size_t i = 0;
    while (i < p->nmappings && p->mappings[i].id != id)
        i++;
    return remapped(b, r, i < p->nmappings ? i : NONE, r->mappings,
                    add_mapping);
}

static int64_t add_function(struct otlp_batch *b, struct remap *r, size_t i)
{
    const struct decoded_function *f = &r->p->functions[i];
    struct fn_entry e = {str_at(b, r, f->name), str_at(b, r, f->system_name),
                         str_at(b, r, f->filename), f->start_line};
    return flat_of(&b->functions, &e);
}

static int64_t function_at(struct otlp_batch *b, struct remap *r, uint64_t id)
{
    size_t i;
    FIND_ID(r->p->functions, r->p->nfunctions, id, i);
    return remapped(b, r, i, r->functions, add_function);
}

static int64_t add_location(struct otlp_batch *b, struct remap *r, size_t i)
{
    const struct decoded_location *l = &r->p->locations[i];
    struct line_entry lines[64];
    size_t n = l->nfunctions < 64 ? l->nfunctions : 64;
    for (size_t j = 0; j < n; j++) {
        lines[j].function = function_at(b, r, l->functions[j]);
        lines[j].line = l->lines[j];
    }
    struct loc_key k = {{0}, lines};
    k.e.mapping = mapping_at(b, r, l->mapping_id);
    k.e.address = l->address;
    k.e.n = n;
    return location_of(b, &k);
}

static int64_t location_at(struct otlp_batch *b, struct remap *r, uint64_t id)
{
    size_t i;
    FIND_ID(r->p->locations, r->p->nlocations, id, i);
    return remapped(b, r, i, r->locations, add_location);
}

/* The attributes of a sample's labels into out (room for n). */
static size_t sample_attrs(struct otlp_batch *b, struct remap *r,
                           const struct decoded_sample *s, int64_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < s->nlabels; i++) {
        const struct decoded_label *l = &s->labels[i];
        const char *key = decoded_string(r->p, l->key);
        struct attr_entry a = {0};
        a.key = string_of(b, strcmp(key, "thread") == 0 ? "thread.name" : key);
        if (l->str > 0) {
            a.str = text_of(b, &b->values, decoded_string(r->p, l->str));
        } else {
            a.is_int = 1;
            a.num = l->num;
            a.unit = str_at(b, r, l->num_unit);
        }
        int64_t idx = a.key < 0 || a.str < 0 ? -1
                                             : flat_of(&b->attributes, &a);
        if (idx > 0)
            out[k++] = idx;
    }
    return k;
}

static int kept(const char *type, const char *const *keep)
{
    if (!keep)
        return 1;
    for (; *keep; keep++)
        if (strcmp(*keep, type) == 0)
            return 1;
    return 0;
}

static void value_type(struct pbuf *out, int field, int64_t type,
                       int64_t unit)
{
    uint64_t v[VT_UNIT] = {(uint64_t)type, (uint64_t)unit};
    pb_varints_message(out, field, v, VT_UNIT);
}

/* One Profile message of sample type t; stacks[i] and attrs of each
 * sample were found once for every type. */
static void write_profile(struct otlp_batch *b, struct remap *r, size_t t,
                          const int64_t *stacks, int64_t *const *attrs,
                          const size_t *nattrs)
{
    const struct decoded_profile *p = r->p;
    struct pbuf *out = &b->profiles;
    size_t m = pb_begin(out, SP_PROFILES);
    value_type(out, PROF_SAMPLE_TYPE, str_at(b, r, p->types[t].type),
               str_at(b, r, p->types[t].unit));
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct decoded_sample *s = &p->samples[i];
        int64_t v = t < s->nvalues ? s->values[t] : 0;
        if (v == 0)
            continue;
        size_t sm = pb_begin(out, PROF_SAMPLES);
        pb_int64(out, SAMPLE_STACK, stacks[i]);
        pb_packed_int64(out, SAMPLE_ATTRS, attrs[i], nattrs[i]);
        pb_packed_int64(out, SAMPLE_VALUES, &v, 1);
        pb_end(out, sm);
    }
    pb_fixed64(out, PROF_TIME, (uint64_t)p->time_nanos);
    pb_int64(out, PROF_DURATION, p->duration_nanos);
    value_type(out, PROF_PERIOD_TYPE, str_at(b, r, p->period_type.type),
               str_at(b, r, p->period_type.unit));
    pb_int64(out, PROF_PERIOD, p->period);
    uint8_t id[16];
    for (int i = 0; i < 2; i++) {
        uint64_t x = hash_splitmix64(b->id_state += HASH_GOLDEN);
        memcpy(id + 8 * i, &x, 8);
    }
    pb_bytes(out, PROF_ID, id, sizeof id);
    pb_end(out, m);
    b->nprofiles++;
}

static int add_decoded(struct otlp_batch *b, const struct decoded_profile *p,
                       const char *const *keep)
{
    struct remap r = {p, NULL, NULL, NULL, NULL};
    size_t ns = p->nsamples ? p->nsamples : 1;
    r.strings = real_malloc(p->nstrings * sizeof *r.strings);
    r.mappings = real_malloc((p->nmappings + 1) * sizeof *r.mappings);
    r.functions = real_malloc((p->nfunctions + 1) * sizeof *r.functions);
    r.locations = real_malloc((p->nlocations + 1) * sizeof *r.locations);
    int64_t *stacks = real_malloc(ns * sizeof *stacks);
    int64_t **attrs = real_calloc(ns, sizeof *attrs);
    size_t *nattrs = real_calloc(ns, sizeof *nattrs);
    int64_t *locs = NULL;
    size_t locs_cap = 0;
    int err = -ENOMEM, added = 0;
    if (!r.strings || !r.mappings || !r.functions || !r.locations ||
        !stacks || !attrs || !nattrs)
        goto out;
    memset(r.strings, 0xff, p->nstrings * sizeof *r.strings);
    memset(r.mappings, 0xff, (p->nmappings + 1) * sizeof *r.mappings);
    memset(r.functions, 0xff, (p->nfunctions + 1) * sizeof *r.functions);
    memset(r.locations, 0xff, (p->nlocations + 1) * sizeof *r.locations);
    for (size_t i = 0; i < p->nsamples; i++) {
        const struct decoded_sample *s = &p->samples[i];
        if (ARRAY_RESERVE(locs, locs_cap, s->nlocations + 1, 64) != 0)
            goto out;
        for (size_t j = 0; j < s->nlocations; j++)
            locs[j] = location_at(b, &r, s->locations[j]);
        stacks[i] = stack_of(b, locs, s->nlocations);
        if (s->nlabels) {
            attrs[i] = real_malloc(s->nlabels * sizeof *attrs[i]);
            if (!attrs[i])
                goto out;
            nattrs[i] = sample_attrs(b, &r, s, attrs[i]);
        }
    }
    for (size_t t = 0; t < p->ntypes; t++)
        if (kept(decoded_string(p, p->types[t].type), keep)) {
            write_profile(b, &r, t, stacks, attrs, nattrs);
            added++;
        }
    err = b->oom || b->profiles.oom ? -ENOMEM : added;
out:
    for (size_t i = 0; attrs && i < ns; i++)
        real_free(attrs[i]);
    real_free(attrs);
    real_free(nattrs);
    real_free(stacks);
    real_free(locs);
    real_free(r.strings);
    real_free(r.mappings);
    real_free(r.functions);
    real_free(r.locations);
    return err;
}

/* A profile the kind writers made stays well under this. */
#define OTLP_MAX_PROFILE (256u << 20)

int otlp_batch_add(struct otlp_batch *b, const struct pbuf *gz,
                   const char *const *keep)
{
    struct pbuf raw = {0};
    int err = gzip_decompress(gz->data, gz->len, OTLP_MAX_PROFILE, &raw);
    if (err != 0) {
        pbuf_free(&raw);
        return err;
    }
    struct decoded_profile p;
    err = decoded_profile_read(raw.data, raw.len, &p);
    pbuf_free(&raw);
    if (err != 0)
        return err;
    err = add_decoded(b, &p, keep);
    decoded_profile_free(&p);
    return err;
}

/* ---- the request ---------------------------------------------------------------- */

static void any_value(struct pbuf *out, int field, const char *str,
                      int64_t num)
{
    size_t m = pb_begin(out, field);
    if (str)
        pb_bytes(out, ANY_STRING, str, strlen(str));
    else
        pb_int64(out, ANY_INT, num);
    pb_end(out, m);
}

/* The dictionary's tables, each a run of messages; fields numbered in a
 * row are one run of varints (pb_varints). */
static void write_mappings(const struct otlp_batch *b, struct pbuf *out)
{
    const struct map_entry *maps = b->mappings.g.v;
    for (size_t i = 0; i < b->mappings.g.n; i++) {
        const struct map_entry *e = &maps[i];
        uint64_t v[MAP_FILE] = {e->start, e->limit, e->offset,
                                (uint64_t)e->file};
        size_t m = pb_begin(out, DICT_MAPPINGS);
        pb_varints(out, MAP_START, v, MAP_FILE);
        pb_packed_int64(out, MAP_ATTRS, &e->attr, e->attr ? 1 : 0);
        pb_end(out, m);
    }
}

static void write_locations(const struct otlp_batch *b, struct pbuf *out)
{
    const struct loc_entry *locs = b->locations.g.v;
    for (size_t i = 0; i < b->locations.g.n; i++) {
        uint64_t v[LOC_ADDRESS] = {(uint64_t)locs[i].mapping, locs[i].address};
        size_t m = pb_begin(out, DICT_LOCATIONS);
        pb_varints(out, LOC_MAPPING, v, LOC_ADDRESS);
        for (size_t j = 0; j < locs[i].n; j++) {
            const struct line_entry *l = &b->lines[locs[i].first + j];
            uint64_t lv[LINE_LINE] = {(uint64_t)l->function, (uint64_t)l->line};
            pb_varints_message(out, LOC_LINES, lv, LINE_LINE);
        }
        pb_end(out, m);
    }
}

static void write_functions(const struct otlp_batch *b, struct pbuf *out)
{
    const struct fn_entry *fns = b->functions.g.v;
    for (size_t i = 0; i < b->functions.g.n; i++) {
        uint64_t v[FN_START_LINE] = {
            (uint64_t)fns[i].name, (uint64_t)fns[i].system_name,
            (uint64_t)fns[i].file, (uint64_t)fns[i].start_line};
        pb_varints_message(out, DICT_FUNCTIONS, v, FN_START_LINE);
    }
}

static void write_attributes(const struct otlp_batch *b, struct pbuf *out)
{
    const struct attr_entry *attrs = b->attributes.g.v;
    const struct str_entry *vals = b->values.g.v;
    for (size_t i = 0; i < b->attributes.g.n; i++) {
        size_t m = pb_begin(out, DICT_ATTRIBUTES);
        pb_int64(out, ATTR_KEY, attrs[i].key);
        if (i > 0)
            any_value(out, ATTR_VALUE,
                      attrs[i].is_int ? NULL : vals[attrs[i].str].s,
                      attrs[i].num);
        pb_int64(out, ATTR_UNIT, attrs[i].unit);
        pb_end(out, m);
    }
}

static void write_dictionary(const struct otlp_batch *b, struct pbuf *out)
{
    size_t d = pb_begin(out, REQ_DICTIONARY);
    write_mappings(b, out);
    write_locations(b, out);
    write_functions(b, out);
    /* The link table's entry 0, the zero link. */
    pb_end(out, pb_begin(out, DICT_LINKS));
    const struct str_entry *strs = b->strings.g.v;
    for (size_t i = 0; i < b->strings.g.n; i++)
        pb_bytes(out, DICT_STRINGS, strs[i].s, strs[i].n);
    write_attributes(b, out);
    const struct stack_entry_otlp *stacks = b->stacks.g.v;
    for (size_t i = 0; i < b->stacks.g.n; i++) {
        size_t m = pb_begin(out, DICT_STACKS);
        pb_packed_int64(out, STACK_LOCATIONS, b->stack_locs + stacks[i].first,
                        stacks[i].n);
        pb_end(out, m);
    }
    pb_end(out, d);
}

int otlp_batch_write(const struct otlp_batch *b, const struct otlp_kv *res,
                     size_t n, const char *scope, const char *version,
                     struct pbuf *out)
{
    size_t rp = pb_begin(out, REQ_RESOURCE_PROFILES);
    size_t rm = pb_begin(out, RP_RESOURCE);
    for (size_t i = 0; i < n; i++) {
        size_t kv = pb_begin(out, RES_ATTRIBUTES);
        pb_bytes(out, KV_KEY, res[i].key, strlen(res[i].key));
        any_value(out, KV_VALUE, res[i].str, res[i].num);
        pb_end(out, kv);
    }
    pb_end(out, rm);
    size_t sp = pb_begin(out, RP_SCOPE_PROFILES);
    size_t sc = pb_begin(out, SP_SCOPE);
    pb_bytes(out, SCOPE_NAME, scope, strlen(scope));
    pb_bytes(out, SCOPE_VERSION, version, strlen(version));
    pb_end(out, sc);
    pbuf_append(out, b->profiles.data, b->profiles.len);
    pb_end(out, sp);
    pb_end(out, rp);
    write_dictionary(b, out);
    return out->oom || b->oom ? -ENOMEM : 0;
}
