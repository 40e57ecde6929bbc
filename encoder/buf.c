/*
 * buf.c owns struct pbuf, the growable byte buffer every encoder writes
 * into. It is entered only from the agent's own threads (HTTP workers) while
 * they build a response, never from a signal handler or an interposed call.
 * It must never abort or print on allocation failure: it records the failure
 * in `oom` and later appends become no-ops, so callers check once at the end.
 */
#include "encoder/encoder.h"
#include "agent/core/real.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for `extra` more bytes; returns 0 or -1 (and sets oom). */
static int reserve(struct pbuf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (extra <= b->cap - b->len)
        return 0;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->oom = 1;
        return -1;
    }
    size_t need = b->len + extra;
    /* Doubling keeps appends amortized O(1) for large profiles. */
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    uint8_t *d = real_realloc(b->data, cap);
    if (!d) {
        b->oom = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

void pbuf_append(struct pbuf *b, const void *p, size_t n)
{
    if (n == 0 || reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void pbuf_puts(struct pbuf *b, const char *s)
{
    pbuf_append(b, s, strlen(s));
}

void pbuf_printf(struct pbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    /* Try the free space first; most lines fit and need one pass. */
    va_list ap;
    size_t room = b->cap - b->len;
    va_start(ap, fmt);
    int n = vsnprintf(room ? (char *)b->data + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < room) {
        b->len += (size_t)n;
        return;
    }
    /* vsnprintf needs space for the NUL, which is not kept in len. */
    if (reserve(b, (size_t)n + 1) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void pbuf_free(struct pbuf *b)
{
    real_free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->oom = 0;
}
