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

#include "agent/agent.h"

struct mg_connection;
struct pbuf;

/* One request to /debug/pprof/... */
struct request {
    struct mg_connection *conn;
    const char *method;
    const char *name;  /* the part after /debug/pprof/ ("" for the index) */
    const char *query; /* raw query string, "" when absent */
    char *body;        /* request body (POST), NUL-terminated; may be NULL */
    size_t body_len;
    int form_body;     /* body is application/x-www-form-urlencoded */
    /* A sub-request (flamegraph.c, stats.c): when capture is set, the
     * response helpers append the body there and set capture_status
     * instead of writing to conn (still used to notice a client gone). */
    struct pbuf *capture;
    int capture_status;
};

/* Starts the server on opt_addr, writes PPROF_PORT_FILE. On failure logs
 * one line and returns -errno; the host goes on. Not async-signal-safe. */
int server_start(void);
/* Creates PPROF_PORT_FILE (empty) now, while the process may: the server
 * fills it once it listens. Not async-signal-safe. */
void server_reserve_port_file(void);
/* In a fork child (the only thread): forgets the parent's server, so that
 * server_start() can start the child's own. Async-signal-safe. */
void server_fork_child(void);

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

/* Reads parameter `name` from the query string or a urlencoded body.
 * Returns 1 and fills out (NUL-terminated) when present, 0 when absent. */
int http_param(struct request *r, const char *name, char *out, size_t size);

/* Go's Atoi-style "debug" parameter: absent or invalid is 0. */
int http_param_debug(struct request *r);

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

enum path_kind { PATH_NOT_FOUND, PATH_REDIRECT, PATH_INDEX, PATH_NAMED };
/* Classifies a request path (already %-decoded and normalized by
 * civetweb); for PATH_NAMED, *name points into uri after /debug/pprof/. */
enum path_kind path_classify(const char *uri, const char **name);
/* The route whose name is exactly name, or NULL. */
const struct route *path_find_route(const char *name);

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

/* ---- endpoints ----------------------------------------------------------- */

void handle_index(struct request *r);
void handle_cmdline(struct request *r);
void handle_symbol(struct request *r);
void handle_threadcreate(struct request *r);
/* processes.c: the processes announced in the run directory, as text
 * (the route) and as a table for the index page. */
void handle_processes(struct request *r);
void processes_html(struct pbuf *b);
void handle_profile(struct request *r); /* cpu_profile.c */
void handle_wall(struct request *r);    /* wall_profile.c */
void handle_block(struct request *r);
void handle_mutex(struct request *r);
long block_count(void);
long mutex_count(void);
void handle_heap(struct request *r);   /* heap.c */
void handle_allocs(struct request *r); /* heap.c */
long heap_profile_count(void);
void handle_peak(struct request *r); /* heap.c */
void handle_memory(struct request *r); /* memory.c: /debug/memory */
/* The charts page's section on /debug/memory (memory_chart.c): HTML and
 * its script, spliced in before </body>. */
extern const char memory_chart_section[];
extern const size_t memory_chart_section_len;
long heap_peak_count(void);
/* Flame graphs, stats and charts (flamegraph.c, stats.c, charts.c). */
void handle_flamegraph(struct request *r);
void handle_charts(struct request *r);
/* Serves /debug/stats and /debug/charts: returns 1 when uri is one of
 * them (answered), 0 otherwise. Not async-signal-safe. */
int debug_pages_serve(struct request *r, const char *uri);
/* Threads profile and custom profiles (goroutine.c, custom.c). */
void handle_goroutine(struct request *r);
long goroutine_count(void);
/* Serves r->name when it is a custom profile: returns 1 when it answered,
 * 0 when no custom profile has that name. Not async-signal-safe. */
int custom_profile_serve(struct request *r);
/* Appends the index rows of custom profiles (descriptions = 0: table rows
 * with counts; 1: description items) whose names sort before `before`
 * (NULL: all the rest), continuing from *pos (start at 0), so that the
 * index interleaves them with the built-in rows in name order.
 * Not async-signal-safe. */
void custom_index_rows(struct pbuf *b, int descriptions, const char *before,
                       size_t *pos);

/* A stack table read for one request (table_snapshot.c). */
struct table_read {
    int debug;                  /* the debug parameter */
    long seconds;               /* > 0: snap is a delta over that time */
    struct stack_snapshot snap; /* the caller frees it */
    int64_t time_nanos;         /* the profile's time (the later snapshot) */
    int64_t duration_nanos;     /* the delta's length, 0 for a full profile */
};
/* Checks debug and seconds as Go does, then snapshots t, or takes the
 * difference of two snapshots seconds apart. Returns 0 with out filled, or
 * -1 after answering the request with Go's error. Not async-signal-safe. */
struct stack_table;
int http_table_snapshot(struct request *r, struct stack_table *t,
                        struct table_read *out);
/* Answers a request read with http_table_snapshot(): out (already encoded
 * by the caller, err its status) as text when debug was set, otherwise as
 * the profile "name" or "name-delta"; 500 when err is not 0.
 * Not async-signal-safe. */
void http_table_reply(struct request *r, const char *name,
                      const struct table_read *tr, int err,
                      const struct pbuf *out);

/* Serves a count profile (one counter per stack) from a stack table:
 * debug=0 proto, debug=1 text, seconds=N delta. */
struct stack_table;
void serve_count_table(struct request *r, const char *name,
                       struct stack_table *t);

/* A row of the index page and a route: name, handler, one-line
 * description, and a function giving the count shown (NULL: 0). */
struct route {
    const char *name;
    void (*handle)(struct request *r);
    const char *description;
    long (*count)(void);
    int listed; /* shown in the index table */
};
extern const struct route routes[];
extern const size_t route_count;

#endif
