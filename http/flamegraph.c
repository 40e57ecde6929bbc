/*
 * /debug/pprof/flamegraph?profile=NAME[&seconds=N][&sample_index=TYPE]
 * [&search=REGEXP][&zoom=REGEXP]: any profile the agent serves, drawn as an interactive
 * SVG flame graph, for people who would rather look than read and for
 * machines without a Go toolchain.
 *
 * It does not know how any profile is made: it runs the profile's own
 * handler as a sub-request whose answer is captured (http.h), reads the
 * gzipped profile.proto back (gzip.c, decode.c) and draws it
 * (flamegraph.c). So every profile, present and future, gets a flame
 * graph, with exactly the data `go tool pprof` would see. NAME is a route
 * name; "profile" (or "cpu") is the CPU profile, 10 s unless seconds says
 * otherwise. Errors of the profile's handler are passed on as they are.
 *
 * Runs on an HTTP worker; holds it as long as the profile takes.
 */
#include "http/http.h"

#include "agent/log.h"
#include "agent/host/proc.h"
#include "encoder/encoder.h"
#include "encoder/flamegraph.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* A gzipped profile never inflates to more than this for the agent's own
 * tables; anything larger is a bug, not a picture. */
#define FLAME_MAX_PROFILE ((size_t)256 << 20)


/* The list of sample types, for an error naming the valid ones. */
static void list_types(const struct decoded_profile *p, char *buf,
                       size_t size)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < p->ntypes && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "",
                               decoded_string(p, p->types[i].type));
}

static void draw(struct request *r, const char *name, long seconds,
                 const struct pbuf *gz)
{
    struct pbuf raw = {0};
    int err = gzip_decompress(gz->data, gz->len, FLAME_MAX_PROFILE, &raw);
    if (err != 0) {
        pbuf_free(&raw);
        http_error(r, 500, "the profile could not be read back (not gzip)");
        return;
    }
    struct decoded_profile p;
    err = decoded_profile_read(raw.data, raw.len, &p);
    pbuf_free(&raw);
    if (err != 0) {
        http_error(r, 500, "the profile could not be read back (malformed)");
        return;
    }

    char want[64] = "";
    http_param(r, "sample_index", want, sizeof want);
    int index = decoded_sample_index(&p, want);
    if (index < 0) {
        char types[256], msg[400];
        list_types(&p, types, sizeof types);
        snprintf(msg, sizeof msg, "sample_index %s is not one of: %s", want,
                 types);
        decoded_profile_free(&p);
        http_error(r, 400, msg);
        return;
    }

    char prog[64], title[160], subtitle[160], search[256] = "", zoom[256] = "";
    /* The name it was started by (agent/host/program.c), as the
     * profiles' main mapping says it. */
    log_snprintf(prog, sizeof prog, "%s", program_name());
    snprintf(title, sizeof title, "%s flame graph of %s (pid %d)",
             strcmp(name, "profile") == 0 ? "CPU" : name, prog,
             (int)getpid());
    if (seconds > 0)
        snprintf(subtitle, sizeof subtitle, "over the last %ld s", seconds);
    else
        snprintf(subtitle, sizeof subtitle, "since the program started");
    http_param(r, "search", search, sizeof search);
    http_param(r, "zoom", zoom, sizeof zoom);
    struct flamegraph_options opt = {
        .title = title,
        .subtitle = subtitle,
        .search = search[0] ? search : NULL,
        .zoom = zoom[0] ? zoom : NULL,
    };
    struct pbuf svg = {0};
    err = flamegraph_svg(&p, index, &opt, &svg);
    decoded_profile_free(&p);
    if (err == 0)
        http_send(r, 200, "image/svg+xml; charset=utf-8", NULL, svg.data,
                  svg.len);
    else
        http_error(r, 500, "failed to draw the flame graph");
    pbuf_free(&svg);
}

void handle_flamegraph(struct request *r)
{
    char name[128];
    if (!http_param(r, "profile", name, sizeof name) || name[0] == '\0') {
        http_error(r, 400,
                   "missing \"profile\" parameter: profile (CPU), heap, "
                   "allocs, block, mutex, threadcreate, ...");
        return;
    }
    if (strcmp(name, "cpu") == 0)
        snprintf(name, sizeof name, "profile");
    const struct route *route = routes_find(name, 0, NULL);
    if (route && !(route->flags & ROUTE_PROFILE)) {
        http_error(r, 400, "not a profile: choose profile (CPU), heap, "
                           "allocs, block, mutex, threadcreate, ...");
        return;
    }
    if (!route) {
        http_error(r, 404, "Unknown profile");
        return;
    }

    long seconds = route->default_seconds;
    if (http_param_seconds(r, &seconds) < 0)
        return;

    /* The sub-request: the same connection (so a client that goes away
     * still ends a long profile), the binary form, the duration. */
    char query[32] = "";
    if (seconds > 0)
        snprintf(query, sizeof query, "seconds=%ld", seconds);
    struct pbuf body = {0};
    struct request sub = {
        .conn = r->conn,
        .out = r->out,
        .method = "GET",
        .name = route->name,
        .query = query,
        .route = route,
        .capture = &body,
    };
    route->handle(&sub);
    if (sub.capture_status != 200) {
        /* The handler's own error (busy CPU profiler, a bad parameter). */
        char msg[512];
        size_t n = body.len < sizeof msg - 1 ? body.len : sizeof msg - 1;
        memcpy(msg, body.data ? (const char *)body.data : "", n);
        while (n > 0 && msg[n - 1] == '\n')
            n--;
        msg[n] = '\0';
        http_error(r, sub.capture_status ? sub.capture_status : 500,
                   n ? msg : "failed to collect profile");
    } else if (body.oom) {
        http_error(r, 500, "failed to collect profile");
    } else {
        draw(r, route->name, seconds, &body);
    }
    pbuf_free(&body);
}
