/*
 * The push's state for the operator (agent/core/push.h's counters): a paragraph
 * of the index page and the "push" object of /debug/stats. Nothing when
 * the push is off ("push": null in the JSON).
 */
#include "http/http.h"

#include "agent/core/push.h"

#include <string.h>

static uint64_t get(const uint64_t *v)
{
    return __atomic_load_n(v, __ATOMIC_RELAXED);
}

/* s as the inside of a JSON string or HTML text: quotes, backslashes,
 * angle brackets and control characters escaped. */
static void put_escaped(struct pbuf *b, const char *s, int html)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (html && (c == '<' || c == '>' || c == '&' || c == '\'' || c == '"'))
            pbuf_printf(b, "&#%d;", c);
        else if (!html && (c == '"' || c == '\\'))
            pbuf_printf(b, "\\%c", c);
        else if (c < ' ')
            pbuf_printf(b, html ? "?" : "\\u%04x", c);
        else
            pbuf_append(b, s, 1);
    }
}

/* The counters, each read once (relaxed), and the last error copied out
 * with its NUL: what both forms print. */
struct status {
    unsigned long long intervals, sent, attempts, retries, dropped, queued;
    unsigned long long bytes;
    long long last_ok_ms;
    int last_status;
    char err[sizeof push_counters.last_error];
};

static void status_read(struct status *s)
{
    const struct push_counters *c = &push_counters;
    s->intervals = get(&c->intervals);
    s->sent = get(&c->sent);
    s->attempts = get(&c->attempts);
    s->retries = get(&c->retries);
    s->dropped = get(&c->dropped);
    s->queued = get(&c->queued);
    s->bytes = get(&c->bytes);
    s->last_ok_ms = __atomic_load_n(&c->last_ok_ns, __ATOMIC_RELAXED) / 1000000;
    s->last_status = __atomic_load_n(&c->last_status, __ATOMIC_RELAXED);
    memcpy(s->err, c->last_error, sizeof s->err);
    s->err[sizeof s->err - 1] = '\0';
}

/* Reads the status into s and writes lead and the endpoint, escaped for
 * the form. */
static void status_begin(struct pbuf *b, struct status *s, const char *lead,
                         int html)
{
    status_read(s);
    pbuf_puts(b, lead);
    put_escaped(b, opt_push.url, html);
}

void push_status_json(struct pbuf *b)
{
    if (!opt_push.on) {
        pbuf_puts(b, "null");
        return;
    }
    struct status s;
    status_begin(b, &s, "{\"endpoint\": \"", 0);
    pbuf_printf(b,
                "\", \"interval_seconds\": %ld, \"intervals\": %llu, "
                "\"sent\": %llu, \"attempts\": %llu, \"retries\": %llu, "
                "\"dropped\": %llu, \"queued\": %llu, \"bytes_sent\": %llu, "
                "\"last_status\": %d, \"last_ok_unix_ms\": %lld, "
                "\"last_error\": \"",
                opt_push.interval_s, s.intervals, s.sent, s.attempts,
                s.retries, s.dropped, s.queued, s.bytes, s.last_status,
                s.last_ok_ms);
    put_escaped(b, s.err, 0);
    pbuf_puts(b, "\"}");
}

void push_status_html(struct pbuf *b)
{
    if (!opt_push.on)
        return;
    struct status s;
    status_begin(b, &s, "<p>\nPush (OTLP) to ", 1);
    pbuf_printf(b,
                " every %ld s: %llu intervals, %llu sent, %llu retries, "
                "%llu dropped, %llu waiting",
                opt_push.interval_s, s.intervals, s.sent, s.retries,
                s.dropped, s.queued);
    if (s.err[0]) {
        pbuf_puts(b, "; last failure: ");
        put_escaped(b, s.err, 1);
    }
    pbuf_puts(b, ".\n</p>\n");
}
