/*
 * The push's state for the operator (agent/push.h's counters): a paragraph
 * of the index page and the "push" object of /debug/stats. Nothing when
 * the push is off ("push": null in the JSON).
 */
#include "http/http.h"

#include "agent/push.h"

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

void push_status_json(struct pbuf *b)
{
    if (!opt_push.on) {
        pbuf_puts(b, "null");
        return;
    }
    const struct push_counters *c = &push_counters;
    pbuf_puts(b, "{\"endpoint\": \"");
    put_escaped(b, opt_push.url, 0);
    pbuf_printf(b,
                "\", \"interval_seconds\": %ld, \"intervals\": %llu, "
                "\"sent\": %llu, \"attempts\": %llu, \"retries\": %llu, "
                "\"dropped\": %llu, \"queued\": %llu, \"bytes_sent\": %llu, "
                "\"last_status\": %d, \"last_ok_unix_ms\": %lld, "
                "\"last_error\": \"",
                opt_push.interval_s, (unsigned long long)get(&c->intervals),
                (unsigned long long)get(&c->sent),
                (unsigned long long)get(&c->attempts),
                (unsigned long long)get(&c->retries),
                (unsigned long long)get(&c->dropped),
                (unsigned long long)get(&c->queued),
                (unsigned long long)get(&c->bytes),
                __atomic_load_n(&c->last_status, __ATOMIC_RELAXED),
                (long long)(__atomic_load_n(&c->last_ok_ns, __ATOMIC_RELAXED) /
                            1000000));
    char err[sizeof c->last_error];
    memcpy(err, c->last_error, sizeof err);
    err[sizeof err - 1] = '\0';
    put_escaped(b, err, 0);
    pbuf_puts(b, "\"}");
}

void push_status_html(struct pbuf *b)
{
    if (!opt_push.on)
        return;
    const struct push_counters *c = &push_counters;
    pbuf_puts(b, "<p>\nPush (OTLP) to ");
    put_escaped(b, opt_push.url, 1);
    pbuf_printf(b,
                " every %ld s: %llu intervals, %llu sent, %llu retries, "
                "%llu dropped, %llu waiting",
                opt_push.interval_s, (unsigned long long)get(&c->intervals),
                (unsigned long long)get(&c->sent),
                (unsigned long long)get(&c->retries),
                (unsigned long long)get(&c->dropped),
                (unsigned long long)get(&c->queued));
    char err[sizeof c->last_error];
    memcpy(err, c->last_error, sizeof err);
    err[sizeof err - 1] = '\0';
    if (err[0]) {
        pbuf_puts(b, "; last failure: ");
        put_escaped(b, err, 1);
    }
    pbuf_puts(b, ".\n</p>\n");
}
