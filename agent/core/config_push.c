/*
 * The push's settings (agent/core/push.h), read once by the constructor with
 * the others (config.c calls config_load_push): PPROF_PUSH,
 * PPROF_PUSH_INTERVAL, and the OpenTelemetry exporter's own variables, as
 * its specification reads them:
 *
 * - the endpoint: OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT used as written, or
 *   OTEL_EXPORTER_OTLP_ENDPOINT with "v1development/profiles" appended to
 *   its path (the path of OTLP's profiles while they are in development,
 *   which the Collector's receiver serves), or
 *   http://localhost:4318/v1development/profiles; http:// or https://;
 * - headers, certificate and timeout: the _PROFILES_ variable when set,
 *   else the generic one; headers as "k=v,k=v" with percent-encoded
 *   values; the timeout in milliseconds;
 * - OTEL_SERVICE_NAME, and OTEL_RESOURCE_ATTRIBUTES as "k=v,k=v",
 *   percent-encoded.
 *
 * A bad value is said in one line naming the variable, and the push stays
 * off: a fleet's agent pushing somewhere it was not told to, or without
 * the header that authorizes it, would be worse than none.
 */
#include "agent/compiler.h"
#include "agent/core/push.h"

#include "agent/config.h"
#include "agent/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Zero until a push is configured (in .bss: 34 KB no process writes
 * unless it pushes). Every reader checks .on first. */
struct push_config opt_push;

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int push_percent_decode(const char *s, size_t n, char *out, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n)
                return -EINVAL;
            int a = hexval(s[i + 1]), b = hexval(s[i + 2]);
            if (a < 0 || b < 0)
                return -EINVAL;
            c = a * 16 + b;
            i += 2;
        }
        if (c == 0 || k + 1 >= size)
            return -EINVAL;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    return 0;
}

/* s without its leading and trailing blanks: *start, *len. */
static void trim(const char *s, size_t n, const char **start, size_t *len)
{
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    *start = s;
    *len = n;
}

/* A header name: an HTTP token. */
static int token(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!strchr("!#$%&'*+-.^_`|~", *s) &&
            !((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
              (*s >= 'A' && *s <= 'Z')))
            return 0;
    return 1;
}

/* Parses "k=v,k=v" into pairs (values percent-decoded; keys too, as the
 * resource attributes allow). headers: keys must be tokens and values
 * free of control characters. Returns 0 or -EINVAL. */
static int parse_pairs(const char *s, struct push_pair *out, size_t max,
                       size_t *n, int headers)
{
    *n = 0;
    while (*s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *item;
        size_t ilen;
        trim(s, len, &item, &ilen);
        s += len + (end ? 1 : 0);
        if (ilen == 0)
            continue;
        const char *eq = memchr(item, '=', ilen);
        if (!eq || *n >= max)
            return -EINVAL;
        const char *k, *v;
        size_t kl, vl;
        trim(item, (size_t)(eq - item), &k, &kl);
        trim(eq + 1, ilen - (size_t)(eq - item) - 1, &v, &vl);
        struct push_pair *p = &out[*n];
        if (kl == 0 ||
            push_percent_decode(k, kl, p->key, sizeof p->key) != 0 ||
            push_percent_decode(v, vl, p->value, sizeof p->value) != 0)
            return -EINVAL;
        if (headers) {
            if (!token(p->key))
                return -EINVAL;
            for (const char *c = p->value; *c; c++)
                if ((unsigned char)*c < ' ' && *c != '\t')
                    return -EINVAL;
        }
        (*n)++;
    }
    return 0;
}

/* Splits url into scheme, host, port and path. Returns 0 or -EINVAL. */
static int parse_url(const char *url, struct push_config *c)
{
    const char *rest;
    if (strncmp(url, "http://", 7) == 0) {
        c->tls = 0;
        rest = url + 7;
    } else if (strncmp(url, "https://", 8) == 0) {
        c->tls = 1;
        rest = url + 8;
    } else {
        return -EINVAL;
    }
    const char *slash = strchr(rest, '/');
    size_t alen = slash ? (size_t)(slash - rest) : strlen(rest);
    if (alen == 0 || memchr(rest, '@', alen) || memchr(rest, '?', alen))
        return -EINVAL;
    const char *colon = NULL;
    if (rest[0] == '[') {
        const char *close = memchr(rest, ']', alen);
        if (!close)
            return -EINVAL;
        if (config_copy_prefix(c->host, sizeof c->host, rest + 1,
                               (size_t)(close - rest - 1)) != 0)
            return -EINVAL;
        if ((size_t)(close - rest) + 1 < alen) {
            if (close[1] != ':')
                return -EINVAL;
            colon = close + 1;
        }
    } else {
        colon = memchr(rest, ':', alen);
        size_t hl = colon ? (size_t)(colon - rest) : alen;
        if (hl == 0 || config_copy_prefix(c->host, sizeof c->host, rest, hl))
            return -EINVAL;
    }
    if (colon) {
        size_t pl = alen - (size_t)(colon + 1 - rest);
        long port;
        if (config_copy_prefix(c->port, sizeof c->port, colon + 1, pl) != 0 ||
            pl == 0 || strspn(c->port, "0123456789") != pl ||
            config_parse_long(c->port, 1, 65535, &port) != 0)
            return -EINVAL;
    } else {
        strcpy(c->port, c->tls ? "443" : "80");
    }
    const char *path = slash ? slash : "/";
    if (config_copy_prefix(c->path, sizeof c->path, path, strlen(path)) != 0)
        return -EINVAL;
    for (const char *p = c->path; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 127)
            return -EINVAL;
    return 0;
}

/* The signal's variable when set, else the generic one; *name says
 * which. */
static const char *either(const char *specific, const char *generic,
                          const char **name)
{
    const char *s = config_env(specific);
    *name = specific;
    if (!s) {
        s = config_env(generic);
        *name = generic;
    }
    return s;
}

static int load_endpoint(struct push_config *c)
{
    const char *s = config_env("OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT");
    const char *name = "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT";
    if (s) {
        if (config_copy_prefix(c->url, sizeof c->url, s, strlen(s)) != 0)
            goto bad;
    } else if ((s = config_env("OTEL_EXPORTER_OTLP_ENDPOINT")) != NULL) {
        name = "OTEL_EXPORTER_OTLP_ENDPOINT";
        size_t n = strlen(s);
        if (parse_url(s, c) != 0) /* the base itself, before the path */
            goto bad;
        const char *sep = n && s[n - 1] == '/' ? "" : "/";
        if (n + 24 >= sizeof c->url)
            goto bad;
        log_snprintf(c->url, sizeof c->url, "%s%sv1development/profiles", s, sep);
    } else {
        strcpy(c->url, "http://localhost:4318/v1development/profiles");
    }
    if (parse_url(c->url, c) == 0)
        return 0;
bad:
    log_info("%s=\"%s\" is not an http:// or https:// URL (host, optional "
             "port, path); push is off",
             name, s);
    return -EINVAL;
}

/* The pairs of variable name, s (NULL: none), into out; a bad list is
 * told (a header's value never: it may be a secret) and turns the push
 * off (-EINVAL). */
static int load_pairs(const char *name, const char *s, struct push_pair *out,
                      size_t max, size_t *n, int headers)
{
    if (!s || parse_pairs(s, out, max, n, headers) == 0)
        return 0;
    if (headers)
        log_info("%s is not a list of name=value (names HTTP tokens, values "
                 "percent-encoded, at most %zu); push is off",
                 name, max);
    else
        log_info("%s=\"%s\" is not a list of key=value (percent-encoded, at "
                 "most %zu); push is off",
                 name, s, max);
    return -EINVAL;
}

static int load_lists(struct push_config *c)
{
    const char *name;
    const char *s = either("OTEL_EXPORTER_OTLP_PROFILES_HEADERS",
                           "OTEL_EXPORTER_OTLP_HEADERS", &name);
    if (load_pairs(name, s, c->headers, PUSH_MAX_HEADERS, &c->nheaders, 1) ||
        load_pairs("OTEL_RESOURCE_ATTRIBUTES",
                   config_env("OTEL_RESOURCE_ATTRIBUTES"), c->attrs,
                   PUSH_MAX_ATTRS, &c->nattrs, 0))
        return -EINVAL;
    s = config_env("OTEL_SERVICE_NAME");
    if (s && (config_copy_prefix(c->service, sizeof c->service, s,
                                 strlen(s)) != 0)) {
        log_info("OTEL_SERVICE_NAME is longer than %zu characters; push is "
                 "off",
                 sizeof c->service - 1);
        return -EINVAL;
    }
    return 0;
}

static int load_numbers(struct push_config *c)
{
    const char *name;
    const char *s = either("OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT",
                           "OTEL_EXPORTER_OTLP_TIMEOUT", &name);
    if (s && (*s == '+' || config_parse_long(s, 1, 600000, &c->timeout_ms))) {
        log_info("%s=\"%s\" is not milliseconds in [1, 600000]; push is off",
                 name, s);
        return -EINVAL;
    }
    s = config_env("PPROF_PUSH_INTERVAL");
    if (s && (*s == '+' || config_parse_long(s, 1, 86400, &c->interval_s))) {
        log_info("PPROF_PUSH_INTERVAL=\"%s\" is not seconds in [1, 86400]; "
                 "push is off",
                 s);
        return -EINVAL;
    }
    s = either("OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE",
               "OTEL_EXPORTER_OTLP_CERTIFICATE", &name);
    if (s && (s[0] != '/' ||
              config_copy_prefix(c->cert, sizeof c->cert, s, strlen(s)))) {
        log_info("%s=\"%s\" is not an absolute file name; push is off", name,
                 s);
        return -EINVAL;
    }
    return 0;
}

/* Apart from config_load_push, whose frame every process would otherwise
 * pay for: the settings are 34 KB, a page of stack touched in each
 * process the agent is preloaded into, most of which never push. */
STARTUP __attribute__((noinline)) static void load_push_settings(void)
{
    struct push_config c = {.timeout_ms = 10000, .interval_s = 15};
    if (load_endpoint(&c) != 0 || load_lists(&c) != 0 ||
        load_numbers(&c) != 0)
        return;
    c.on = 1;
    opt_push = c;
}

STARTUP void config_load_push(void)
{
    /* A later attach's settings start from the defaults, not from the
     * last attach's: off, and the whole of them written again when on.
     * Nothing is written otherwise: writing the 34 KB of defaults cost
     * every process the agent is loaded into 9 page faults, and its flag
     * alone one. */
    if (config_attached)
        opt_push.on = 0;
    const char *s = config_env("PPROF_PUSH");
    if (!s || strcmp(s, "off") == 0 || s[0] == '\0')
        return;
    if (strcmp(s, "otlp") != 0) {
        log_info("PPROF_PUSH=\"%s\" is not otlp or off; push is off", s);
        return;
    }
    load_push_settings();
}
