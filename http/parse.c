/*
 * The parsers of request paths and symbolz input, kept apart from the
 * handlers so test/fuzz/ can run them alone. Paths: which part of
 * /debug/pprof/ (or /debug/) a path asks for; only exact names from the
 * routes registry (routes.c) are served, everything else is 404, so no
 * path reaches a file, a directory listing or anything of civetweb's own.
 *
 * Runs on the agent's server threads over attacker-controlled bytes; never
 * allocates, never reads past the lengths it is given.
 */
#include "http/http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char prefix[] = "/debug/pprof/";
static const char beside[] = "/debug/";

enum path_kind path_classify(const char *uri, const char **name)
{
    *name = "";
    if (!uri)
        return PATH_NOT_FOUND;
    if (strcmp(uri, "/debug/pprof") == 0)
        return PATH_REDIRECT;
    if (strncmp(uri, prefix, sizeof prefix - 1) == 0) {
        *name = uri + sizeof prefix - 1;
        return (*name)[0] == '\0' ? PATH_INDEX : PATH_NAMED;
    }
    /* /debug/stats and the like live beside /debug/pprof/: a name without
     * a further slash, which only a route flagged ROUTE_BESIDE serves. */
    if (strncmp(uri, beside, sizeof beside - 1) == 0 &&
        uri[sizeof beside - 1] != '\0' &&
        !strchr(uri + sizeof beside - 1, '/')) {
        *name = uri + sizeof beside - 1;
        return PATH_BESIDE;
    }
    return PATH_NOT_FOUND;
}

/* Parses one token as strtoull with base 0 would, but the whole token must
 * be a number. Returns 0 when it is not. */
static uintptr_t parse_address(const char *tok, size_t len)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return 0;
    memcpy(buf, tok, len);
    buf[len] = '\0';
    if (buf[0] < '0' || buf[0] > '9') /* no sign, no space */
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    if (errno || *end != '\0')
        return 0;
    return (uintptr_t)v;
}

void symbol_parse(const char *in, size_t len,
                  void (*fn)(uintptr_t addr, void *ctx), void *ctx)
{
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && in[j] != '+')
            j++;
        uintptr_t addr = parse_address(in + i, j - i);
        if (addr)
            fn(addr, ctx);
        i = j + 1;
    }
}
