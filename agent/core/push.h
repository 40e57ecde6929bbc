/*
 * The push to an OpenTelemetry Collector (PPROF_PUSH=otlp), as the
 * recording layer keeps it: its settings, read with the others by the
 * constructor (core/config_push.c), and its counters (core/push_counters.c),
 * which the push thread (process/push.c) updates and /debug/stats and the
 * index page read.
 *
 * Contexts: config_load_push() in the constructor; the counters are
 * atomics, written by the push thread and read by HTTP workers.
 */
#ifndef PPROF_PUSH_H
#define PPROF_PUSH_H

#include <stddef.h>
#include <stdint.h>

/* ---- settings (config_push.c) -------------------------------------------- */

#define PUSH_MAX_HEADERS 16
#define PUSH_MAX_ATTRS 32

struct push_pair {
    char key[128];
    char value[512];
};

struct push_config {
    int on;              /* PPROF_PUSH=otlp and every setting valid */
    int tls;             /* https:// */
    char url[1024];      /* the endpoint as used, for messages */
    char host[256];      /* the host as written (a name or an IP literal) */
    char port[8];        /* decimal */
    char path[768];      /* from the first '/', "/v1development/profiles" and the like */
    char cert[1024];     /* OTEL_EXPORTER_OTLP_CERTIFICATE, "" = system CAs */
    struct push_pair headers[PUSH_MAX_HEADERS];
    size_t nheaders;
    struct push_pair attrs[PUSH_MAX_ATTRS]; /* OTEL_RESOURCE_ATTRIBUTES */
    size_t nattrs;
    char service[256];   /* OTEL_SERVICE_NAME, "" = from the attributes */
    long timeout_ms;     /* OTEL_EXPORTER_OTLP_TIMEOUT, default 10000 */
    long interval_s;     /* PPROF_PUSH_INTERVAL, default 15 */
};

extern struct push_config opt_push;

/* Reads PPROF_PUSH and the OTEL_* settings of the exporter. A bad one is
 * said in one line naming it, and the push stays off. Called by
 * config_load(). Not async-signal-safe. */
void config_load_push(void);

/* Percent-decodes s (n bytes) into out (size bytes, NUL-terminated).
 * Returns 0, or -EINVAL for a bad escape, a NUL, or no room.
 * Async-signal-safe. Does not allocate. */
int push_percent_decode(const char *s, size_t n, char *out, size_t size);

/* ---- counters (push_counters.c) ------------------------------------------- */

struct push_counters {
    uint64_t intervals;  /* intervals collected */
    uint64_t sent;       /* requests the collector accepted (2xx) */
    uint64_t attempts;   /* requests tried, retries included */
    uint64_t retries;    /* of those, retries */
    uint64_t dropped;    /* intervals dropped: queue full, refused, gave up */
    uint64_t bytes;      /* bytes of requests accepted */
    uint64_t queued;     /* intervals waiting now */
    int64_t last_ok_ns;  /* when the last request was accepted (realtime) */
    int last_status;     /* the last answer's HTTP status; 0: no answer */
    char last_error[128];
};

extern struct push_counters push_counters;

#endif
