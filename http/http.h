/*
 * http/ serves: the civetweb lifecycle (server.c), the response helpers and
 * parameter parsing (respond.c), and one file per endpoint. Every function
 * here runs on the agent's own server threads, which keep the reentrancy
 * flag set: they may allocate and block, and are never sampled.
 */
#ifndef PPROF_HTTP_H
#define PPROF_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "agent/stacks/stack_table.h"
#include "encoder/encoder.h"

struct mg_connection;
struct pbuf;

/* Where a response goes when it does not go to civetweb: the socket of a
 * request handed off to a thread of its own (handoff.c). */
struct response_out {
    /* Writes all len bytes; 0, or -1 when the client is gone or stuck
     * (the rest of the response is then dropped). */
    int (*write)(void *ctx, const void *data, size_t len);
    /* The client's socket, to notice that it went away; -1 if unknown. */
    int (*socket)(void *ctx);
    void *ctx;
};

/* One request to /debug/pprof/... */
struct request {
    struct mg_connection *conn; /* NULL when out is set */
    const struct response_out *out; /* NULL: the response goes to conn */
    const char *method;
    const char *name;  /* the part after /debug/pprof/ ("" for the index) */
    const char *query; /* raw query string, "" when absent */
    char *body;        /* request body (POST), NUL-terminated; may be NULL */
    size_t body_len;
    int form_body;     /* body is application/x-www-form-urlencoded */
    const struct route *route; /* the route serving it (NULL: none) */
    /* A sub-request (flamegraph.c): when capture is set, the
     * response helpers append the body there and set capture_status
     * instead of writing to conn (still used to notice a client gone). */
    struct pbuf *capture;
    int capture_status;
};

/* The server's lifecycle (server_start and the fork and port-file calls)
 * is in http/server.h, the folder's face for the process shell. */

/* ---- requests that wait (handoff.c) -------------------------------------- */

/* Serves a request that waits for seconds (a CPU profile when cpu is set,
 * a flame graph, a ?seconds=N delta) on a thread of its own, started here,
 * that runs handle and writes the response on the connection's socket;
 * returns at once. At most 8 at once: beyond that 503 (or handle's own
 * refusal for a second CPU profile). Falls back to running handle here
 * when no thread can be started. Takes r->body when it hands off. Not
 * async-signal-safe. */
void handoff_serve(struct request *r, void (*handle)(struct request *r),
                   int cpu);
/* In a fork child: closes the parent's handed-off sockets and forgets its
 * hand-off threads. Async-signal-safe. */
void handoff_fork_child(void);

/* ---- responses (respond.c) ----------------------------------------------- */

/* Go's serveError: status, text/plain, X-Go-Pprof: 1, body msg + "\n". */
void http_error(struct request *r, int status, const char *msg);
/* Sends a complete response with Content-Length. disposition_name, when not
 * NULL, adds Content-Disposition: attachment; filename="NAME". */
void http_send(struct request *r, int status, const char *content_type,
               const char *disposition_name, const void *body, size_t len);
/* Sends a gzipped profile as Go does (application/octet-stream). */
void http_send_profile(struct request *r, const char *filename,
                       const struct pbuf *gz);
/* Sends text/plain; charset=utf-8. */
void http_send_text(struct request *r, const struct pbuf *text);
/* http_send with more header lines (each ending in \r\n). */
void http_send_with(struct request *r, const char *content_type,
                    const char *disposition_name, const char *extra,
                    const void *body, size_t len);

/* Reads parameter `name` from the query string or a urlencoded body.
 * Returns 1 and fills out (NUL-terminated) when present, 0 when absent. */
int http_param(struct request *r, const char *name, char *out, size_t size);

/* Go's Atoi-style "debug" parameter: absent or invalid is 0. */
int http_param_debug(struct request *r);

/* The "seconds" parameter, 1 to 3600: returns 1 with *seconds set, 0 when
 * absent or empty (*seconds untouched), -1 after answering 400. */
int http_param_seconds(struct request *r, long *seconds);

/* Parameter `name` as a non-negative number of seconds, fractions allowed
 * (min_age, min_seconds): returns 1 with *ns set, 0 when absent or empty
 * (*ns untouched), -1 after answering 400. */
int http_param_ns(struct request *r, const char *name, int64_t *ns);

/* Appends s with the five HTML-special characters as entities (as Go's
 * html.EscapeString). Not async-signal-safe. */
void http_html_escape(struct pbuf *b, const char *s);

/*
 * The checks of Go's delta profiles (?seconds=N on a named profile):
 * returns 0 and *seconds = 0 when absent, 0 and *seconds > 0 when valid,
 * and -1 after answering 400 with Go's message otherwise. delta_ok says
 * whether this profile supports deltas.
 */
int http_param_delta_seconds(struct request *r, int delta_ok, int debug,
                             long *seconds);

/* Sleeps for seconds, returning early (and -1) when the client went away.
 * Returns 0 after the full time. */
int http_wait(struct request *r, long seconds);
/* The client's socket (a registered descriptor of civetweb's, or the
 * hand-off thread's duplicate), or -1 when it cannot be found. */
int http_client_socket(struct request *r);
/* 1 when the client of r has gone away (closed its connection). */
int http_client_gone(struct request *r);

/* ---- parsers facing the network (auth.c, parse.c) ----------------------- *
 * Pure functions over attacker-controlled bytes, fuzzed by test/fuzz/.
 * None allocates. Not async-signal-safe (server threads only). */

#define AUTH_HEADER_MAX 1024

/* 1 when the Authorization header value (NULL when absent) carries token
 * as "Bearer TOKEN" or as the password of basic auth; 1 when token is
 * empty (no authentication configured); 0 otherwise. Compares in time that
 * depends on the lengths only. */
int auth_check(const char *header, const char *token);
/* 1 when the two byte strings are equal, in time that depends on the
 * lengths only. */
int auth_equal(const char *a, size_t alen, const char *b, size_t blen);
/* Decodes standard or URL-safe base64 (padding optional) into out.
 * Returns the number of bytes or -1 (bad input, or more than size). */
int auth_base64_decode(const char *in, size_t len, char *out, size_t size);

enum path_kind {
    PATH_NOT_FOUND,
    PATH_REDIRECT,
    PATH_INDEX,
    PATH_NAMED, /* /debug/pprof/NAME */
    PATH_BESIDE /* /debug/NAME, beside /debug/pprof/ */
};
/* Classifies a request path (already %-decoded and normalized by
 * civetweb); for PATH_NAMED and PATH_BESIDE, *name points into uri after
 * /debug/pprof/ or /debug/. */
enum path_kind path_classify(const char *uri, const char **name);

/* Calls fn for every nonzero address in a symbolz request ('+'-separated
 * tokens with C base prefixes; anything else is skipped, as Go does). */
void symbol_parse(const char *in, size_t len,
                  void (*fn)(uintptr_t addr, void *ctx), void *ctx);

/* Responses sent, by status: slots 1..5 count 1xx..5xx (0: anything
 * else), slots 6.. the codes of HTTP_STATUS_CODES in that order. Written
 * with atomics by every server thread, read by /debug/stats. */
#define HTTP_STATUS_CODES 200, 301, 400, 401, 404, 413, 500, 503
#define HTTP_STATUS_SLOTS (6 + 8)
extern long http_status_counts[HTTP_STATUS_SLOTS];
/* Counts one response (the helpers above do it; code that writes a status
 * line itself calls this). Not async-signal-safe. */
void http_count_status(int status);

/* ---- routes (routes.c) --------------------------------------------------- */

#define ROUTE_LISTED 1  /* a row of the index table */
#define ROUTE_PROFILE 2 /* a profile.proto at debug=0, with a flame graph */
#define ROUTE_LONG 4    /* waits for seconds even without ?seconds=N */
#define ROUTE_DELTA 8   /* ?seconds=N asks for a delta (which waits) */
#define ROUTE_CPU 16    /* takes the one CPU profiler */
#define ROUTE_BESIDE 32 /* served at /debug/NAME, not /debug/pprof/NAME */

/* An endpoint: name, handler, the one-line description of the index page,
 * the count it shows (NULL: 0; given the route's name), its ROUTE_* flags,
 * and the seconds a flame graph asks of it (0: a snapshot). */
struct route {
    const char *name;
    void (*handle)(struct request *r);
    const char *description;
    long (*count)(const char *name);
    int flags;
    int default_seconds;
};
extern const struct route routes[];
extern const size_t route_count;
/* Room routes_listed() may need. */
#define ROUTES_MAX 64

/* The route called name, served beside /debug/pprof/ (beside = 1) or
 * under it; for a custom profile (only when custom is not NULL) the route
 * is written to *custom. NULL when there is none. Not async-signal-safe. */
const struct route *routes_find(const char *name, int beside,
                                struct route *custom);
/* The listed routes, built-in and custom (their routes written to custom,
 * room for CUSTOM_MAX_PROFILES), in name order, into out (room for
 * ROUTES_MAX + CUSTOM_MAX_PROFILES). Returns how many.
 * Not async-signal-safe. */
size_t routes_listed(const struct route **out, struct route *custom);
/* 1 when the request's route accepts ?seconds=N as a delta. */
static inline int http_delta_ok(const struct request *r)
{
    return r->route && (r->route->flags & ROUTE_DELTA);
}

/* ---- endpoints ----------------------------------------------------------- */

/* Every handler, void handle_NAME(struct request *r), one per file named
 * for it (heap and allocs and peak: heap.c; block and mutex: contention.c;
 * profile: cpu_profile.c; custom: every custom profile), and every count
 * the index shows, long NAME_count(const char *route_name). Listed once so
 * that the fuzz targets' stubs define the same set. */
#define HTTP_HANDLERS(X)                                                       \
    X(index) X(cmdline) X(symbol) X(threadcreate) X(processes) X(profile)      \
    X(block) X(mutex) X(heap) X(allocs) X(peak) X(memory) X(flamegraph)        \
    X(stats) X(charts) X(goroutine) X(custom) X(wall) X(deadlock) X(trace)
#define HTTP_COUNTS(X)                                                         \
    X(threadcreate) X(block) X(mutex) X(heap_profile) X(heap_peak) X(goroutine)  \
    X(deadlock)
#define HTTP_DECLARE_HANDLER(name) void handle_##name(struct request *r);
#define HTTP_DECLARE_COUNT(name) long name##_count(const char *route_name);
HTTP_HANDLERS(HTTP_DECLARE_HANDLER)
HTTP_COUNTS(HTTP_DECLARE_COUNT)

/* The processes announced in the run directory as a table for the index
 * page (processes.c). */
void processes_html(struct pbuf *b);

/* The push's state (push_status.c): the index page's paragraph, and the
 * value of /debug/stats's "push" (null when off). */
void push_status_html(struct pbuf *b);
void push_status_json(struct pbuf *b);
/* The charts page's section on /debug/memory (memory_chart.c): HTML and
 * its script, spliced in before </body>. */
extern const char memory_chart_section[];
extern const size_t memory_chart_section_len;
struct memory_report;
/* /debug/memory as a page for people (memory_page.c). Returns 0, or -1
 * out of memory. */
int memory_page(const struct memory_report *r, struct pbuf *b);
/* The value of request header name, or NULL (none, or a sub-request).
 * Not async-signal-safe. */
const char *http_header(struct request *r, const char *name);

/* A stack table read for one request (table_snapshot.c). */
struct table_read {
    struct write_options o;     /* debug, and the profile's time window */
    long seconds;               /* > 0: snap is a delta over that time */
    struct stack_snapshot snap; /* the caller frees it */
};
/* How a profile's records are read over a window: first() now; with
 * seconds, later() after them, which leaves the difference in place of the
 * first (and frees the first, also when it fails); drop() frees the first
 * when the wait is cancelled. Each returns 0 or non-zero on failure. */
struct table_take {
    int (*first)(void *arg, struct table_read *tr);
    int (*later)(void *arg, struct table_read *tr);
    void (*drop)(void *arg, struct table_read *tr);
};
/* Checks debug and seconds as Go does, then reads the records with take
 * (one read, or the difference of two seconds apart), and stamps tr->o
 * with the window as Go does. Returns 0, or -1 after answering the request
 * with Go's error. Not async-signal-safe. */
int http_table_window(struct request *r, struct table_read *tr,
                      const struct table_take *take, void *arg);
/* Checks debug and seconds as Go does, then snapshots t, or takes the
 * difference of two snapshots seconds apart. Returns 0 with out filled, or
 * -1 after answering the request with Go's error. Not async-signal-safe. */
struct stack_table;
int http_table_snapshot(struct request *r, struct stack_table *t,
                        struct table_read *out);
/* Answers with a profile a writer produced (err its status): text when
 * o->debug was set, otherwise the profile "name", or "name-delta" for a
 * delta; 500 when err is not 0. Frees out. Not async-signal-safe. */
void http_reply(struct request *r, const char *name,
                const struct write_options *o, int err, struct pbuf *out);

/* Serves a count profile (one counter per stack) from a stack table:
 * debug=0 proto, debug=1 text, seconds=N delta. */
void serve_count_table(struct request *r, const char *name,
                       struct stack_table *t);

#endif
