/*
 * The push (PPROF_PUSH=otlp; settings in agent/core/push.h): every
 * PPROF_PUSH_INTERVAL seconds, what the pull endpoints give for the
 * window, as one OTLP profiles request to an OpenTelemetry Collector.
 *
 * - push.c: the two threads of the agent's own, the queue between them
 *   and its bounds, retries, the fork child and the exit;
 * - push_collect.c: an interval's profiles, from the kind writers;
 * - push_resource.c: the resource's attributes;
 * - push_http.c: one OTLP/HTTP request with a deadline;
 * - push_tls.c: TLS through the system's OpenSSL, loaded only for an
 *   https:// endpoint.
 *
 * No host thread ever waits for any of it, except the one that calls
 * exit(), for the last interval, at most PUSH_EXIT_MS.
 */
#ifndef PPROF_PROCESS_PUSH_H
#define PPROF_PROCESS_PUSH_H

#include "encoder/encoder.h"
#include "encoder/otlp.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The scope's version in every request. */
#define PUSH_AGENT_VERSION "1"
/* Intervals kept while the collector cannot take them; the oldest goes. */
#define PUSH_QUEUE_MAX 4
/* Tries of one interval before it is dropped. */
#define PUSH_TRIES_MAX 6
/* The longest a host's exit() waits for the last interval. */
#define PUSH_EXIT_MS 5000

/* ---- push.c ------------------------------------------------------------ */

/* Starts the push's threads (once per process; a forked child's own).
 * Not async-signal-safe. */
void push_start(void);
/* Ends an attached agent's push (the detacher): the last window sent,
 * within PUSH_EXIT_MS, the threads joined, the state and the counters
 * set back for a later attach. Nothing when the push is not an attached
 * one. Not async-signal-safe. */
void push_stop(void);
/* Fork child: the parent's threads, queue and profile stay the parent's.
 * Only resets state. */
void push_fork_child(void);

/* ---- push_collect.c ----------------------------------------------------- */

/* The first window starts: the deltas' baselines, the CPU profile. */
void push_collect_start(void);
/* About once a second: the CPU profile's samples moved out of its buffer;
 * a profile started or joined when none is ours. */
void push_collect_tick(void);
/* The window ending now as one OTLP request into out; final: the CPU
 * profile stops. Returns 0 or -errno. */
int push_collect_interval(int final, struct pbuf *out);
void push_collect_fork_child(void);
/* After the last window (the collector ended): the baselines freed, for
 * a later push_collect_start. */
void push_collect_stop(void);

/* ---- push_resource.c ----------------------------------------------------- */

/* The resource's attributes into out (room for max): the process's and
 * host's as the semantic conventions name them, then
 * OTEL_RESOURCE_ATTRIBUTES (which wins over them), service.name last
 * (OTEL_SERVICE_NAME, else the attributes', else
 * unknown_service:<executable name>). bufs holds the texts. Returns how
 * many. */
size_t push_resource(struct otlp_kv *out, size_t max, char bufs[6][1024]);
/* A new service.instance.id (a random UUID) for this process. */
void push_resource_new_instance(void);

/* ---- push_http.c ------------------------------------------------------------ */

struct push_answer {
    int status;         /* HTTP status; 0: none */
    long retry_after_s; /* Retry-After in seconds; -1: none */
    char why[96];       /* the reason phrase */
};
/* POSTs body to the endpoint before deadline (push_mono_ns()). Returns 0
 * with the answer in *a, or -errno (no answer). */
int push_http_post(const struct pbuf *body, int64_t deadline,
                   struct push_answer *a);
/* CLOCK_MONOTONIC in ns, the push's deadlines' clock. */
int64_t push_mono_ns(void);

/* ---- push_tls.c ---------------------------------------------------------------- */

struct push_tls;
/* A TLS session over the connected socket fd, verified against the
 * system's CAs or OTEL_EXPORTER_OTLP_CERTIFICATE and host, before the
 * deadline (CLOCK_MONOTONIC ns). Returns 0 or -errno (-ENOSYS: no
 * OpenSSL here). */
int push_tls_open(int fd, const char *host, int64_t deadline,
                  struct push_tls **out);
/* Bytes written or read (0: the peer closed), -EAGAIN to wait for the
 * socket, or -errno. */
ssize_t push_tls_write(struct push_tls *t, const void *p, size_t n);
ssize_t push_tls_read(struct push_tls *t, void *p, size_t n);
void push_tls_close(struct push_tls *t);

#endif
