/*
 * Reading a profile back and drawing it: a small profile.proto reader
 * (decode.c) that keeps only what a flame graph or a total needs, and the
 * flame graph itself (flamegraph.c): stacks folded root first into a tree,
 * drawn as a self-contained interactive SVG.
 *
 * Everything here runs on the agent's own HTTP threads on bytes the agent
 * itself produced; it still treats them as untrusted (every index and
 * length is checked), so a bug elsewhere cannot turn into a crash here.
 */
#ifndef PPROF_FLAMEGRAPH_H
#define PPROF_FLAMEGRAPH_H

#include "encoder/encoder.h"

#include <stddef.h>
#include <stdint.h>

/* ---- profile.proto reader (decode.c) -------------------------------------- */

struct decoded_type {
    int64_t type; /* string index */
    int64_t unit; /* string index */
};

struct decoded_label {
    int64_t key, str, num, num_unit; /* string indices, but num */
};

struct decoded_sample {
    uint64_t *locations; /* location ids, leaf first */
    size_t nlocations;
    int64_t *values; /* one per sample type (missing ones read as 0) */
    size_t nvalues;
    struct decoded_label *labels;
    size_t nlabels;
};

struct decoded_mapping {
    uint64_t id;
    uint64_t start, limit, offset; /* offset: file offset of start */
    int64_t filename;              /* string index */
    int64_t build_id;              /* string index */
};

struct decoded_location {
    uint64_t id;
    uint64_t mapping_id; /* 0: none */
    uint64_t address;
    uint64_t *functions; /* function id of each line, innermost first */
    int64_t *lines;      /* the line number of each */
    size_t nfunctions;
};

struct decoded_function {
    uint64_t id;
    int64_t name; /* string index */
    int64_t system_name, filename, start_line; /* string indices, a line */
};

/* The fields of a profile a reader needs (a flame graph, a total, the
 * OTLP form: encoder/otlp.c); everything else is skipped.
 * Locations and functions are sorted by id once decoding ends. */
struct decoded_profile {
    char **strings; /* NUL-terminated copies; strings[0] is "" */
    size_t nstrings;
    struct decoded_type *types;
    size_t ntypes;
    struct decoded_sample *samples;
    size_t nsamples;
    struct decoded_mapping *mappings; /* in the message's order */
    size_t nmappings;
    struct decoded_location *locations;
    size_t nlocations;
    struct decoded_function *functions;
    size_t nfunctions;
    int64_t default_sample_type; /* string index, 0 when unset */
    int64_t duration_nanos;
    int64_t time_nanos;
    struct decoded_type period_type;
    int64_t period;
};

/* Decodes an uncompressed profile.proto message of n bytes into *out.
 * Returns 0, -ENOMEM, or -EINVAL for a malformed message (bad wire data,
 * a string index outside the table); *out is then empty. Free with
 * decoded_profile_free(). Not async-signal-safe. */
int decoded_profile_read(const void *data, size_t n,
                         struct decoded_profile *out);
/* Frees what decoded_profile_read() allocated. Not async-signal-safe. */
void decoded_profile_free(struct decoded_profile *p);

/* The string at index i, or "" when i is outside the table.
 * Not async-signal-safe. */
const char *decoded_string(const struct decoded_profile *p, int64_t i);

/*
 * Chooses a sample type the way pprof does: `want` ("inuse_space", or an
 * index such as "2") when given and not empty; otherwise the profile's
 * default_sample_type; otherwise the last type. Returns the index, or -1
 * when `want` names no type (or the profile has none).
 * Not async-signal-safe.
 */
int decoded_sample_index(const struct decoded_profile *p, const char *want);

/* The sum of value `index` over every sample. Not async-signal-safe. */
int64_t decoded_total(const struct decoded_profile *p, int index);

/* ---- flame graph (flamegraph.c) ------------------------------------------ */

struct flamegraph_options {
    const char *title;    /* first line of the picture, e.g. "heap" */
    const char *subtitle; /* second line (may be NULL) */
    int width;            /* pixels without a script (an <img>); 1200 when 0.
                           * The script fits the window's width. */
    const char *search;   /* regular expression highlighted at load, or NULL */
    const char *zoom;     /* regular expression: zoom on the first match */
};

/*
 * Folds the samples of p (value `index`, root first, inlined frames
 * expanded) into a tree and appends a self-contained SVG document to out:
 * one rectangle per frame with its text and a <title> (name, value in the
 * type's unit, share of the total; a frame with no function name is named
 * by its object and file offset, "[libfoo.so]+0x1a2b", or by its address
 * when no mapping holds it); inline script for hover details,
 * click to zoom, and search (a prompt, or `search` given at load) that
 * highlights matches and shows their share; `zoom` zooms on the first
 * frame (depth first) whose name matches, at load. Frames narrower than a tenth
 * of a pixel are left out (and counted in the picture), and more when
 * that leaves over 30000 frames, so that a browser stays responsive (the
 * SVG stays under about 10 MB). Samples with a
 * value <= 0 (negative in deltas) are left out and counted. Names are
 * XML-escaped; the result is well-formed XML with no external reference.
 * Returns 0, -ENOMEM or -EINVAL (bad index). Not async-signal-safe.
 */
int flamegraph_svg(const struct decoded_profile *p, int index,
                   const struct flamegraph_options *opt, struct pbuf *out);

/* Appends s escaped for XML text and attribute values (&, <, >, ", ');
 * bytes that XML 1.0 forbids (control characters) become '?', and
 * invalid UTF-8 bytes become '?'. Not async-signal-safe. */
void flamegraph_xml_escape(struct pbuf *out, const char *s);

#endif
