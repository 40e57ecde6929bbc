/*
 * The OTLP form of the agent's profiles (otlp.c): one
 * ExportProfilesServiceRequest (opentelemetry.proto.collector.profiles.
 * v1development, OTLP 1.10, the receiver's development version 1) built
 * from the profile.proto messages the kind writers produce (encoder.h), so
 * that each kind is still assembled once and the pushed interval carries
 * what a pull of the same window gives. One OTLP Profile per sample type
 * (OTLP has one sample type a profile); every profile of the request
 * shares one ProfilesDictionary (strings, functions, mappings, locations,
 * stacks and attributes, each deduplicated, entry 0 the zero value).
 *
 * Runs on the agent's own threads only (the push thread); allocates.
 */
#ifndef PPROF_OTLP_H
#define PPROF_OTLP_H

#include "encoder/encoder.h"

#include <stddef.h>
#include <stdint.h>

/* The version of the profiles schema written, for the
 * OTLP-Profiles-Development-Version header. */
#define OTLP_PROFILES_VERSION "1"

/* A resource or scope attribute: a string, or an integer when str is
 * NULL. */
struct otlp_kv {
    const char *key;
    const char *str;
    int64_t num;
};

struct otlp_batch;

/* An empty request; NULL when out of memory. Not async-signal-safe. */
struct otlp_batch *otlp_batch_new(void);
void otlp_batch_free(struct otlp_batch *b);

/* Adds the sample types of a gzipped profile.proto message (as the kind
 * writers give it) named in keep (NULL-terminated; NULL: every type) as
 * one Profile each: its samples with a non-zero value, their stacks, the
 * labels as attributes ("thread" as thread.name), mappings with their
 * build id (process.executable.build_id.gnu), the period and the time.
 * Returns the number of profiles added, or -errno (-EINVAL: not a
 * profile). Not async-signal-safe. */
int otlp_batch_add(struct otlp_batch *b, const struct pbuf *gz,
                   const char *const *keep);
/* Profiles added so far. */
size_t otlp_batch_profiles(const struct otlp_batch *b);

/* Appends the request to out: one ResourceProfiles with the resource's
 * attributes (res, n of them), one ScopeProfiles named scope/version,
 * every profile added, then the dictionary. Returns 0 or -ENOMEM. Not
 * async-signal-safe. */
int otlp_batch_write(const struct otlp_batch *b, const struct otlp_kv *res,
                     size_t n, const char *scope, const char *version,
                     struct pbuf *out);

#endif
