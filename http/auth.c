/*
 * PPROF_TOKEN checking: the Authorization header of a request against the
 * configured token, as "Bearer TOKEN" or HTTP basic auth with TOKEN as the
 * password (any user name), which is what Go's HTTP client sends for
 * `go tool pprof http://user:TOKEN@host:port/...`.
 *
 * Runs on the agent's server threads, before any endpoint sees the request.
 * The header is attacker-controlled: every read is bounded by its length,
 * nothing is allocated, and the comparison takes the same time whatever
 * prefix of the token an attacker has guessed.
 */
#include "http/http.h"

#include <string.h>

int auth_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* Walks the longer of the two so the time depends on lengths only. */
    size_t n = alen > blen ? alen : blen;
    unsigned diff = (unsigned)(alen ^ blen) | (unsigned)((alen ^ blen) >> 32);
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < alen ? (unsigned char)a[i] : 0;
        unsigned char y = i < blen ? (unsigned char)b[i] : 0;
        diff |= (unsigned)(x ^ y);
    }
    return diff == 0;
}

/* A digit's value in the base64 alphabet, or in the URL-safe one (- and
 * _ for + and /); -1 for anything else. */
static int b64_value(unsigned char c)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "abcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *at = c ? strchr(alphabet, c) : NULL;
    if (at)
        return (int)(at - alphabet);
    return c == '-' ? 62 : c == '_' ? 63 : -1;
}

int auth_base64_decode(const char *in, size_t len, char *out, size_t size)
{
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    size_t i = 0;
    for (; i < len && in[i] != '='; i++) {
        int v = b64_value((unsigned char)in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n >= size)
                return -1;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    for (; i < len; i++) /* only padding may follow */
        if (in[i] != '=')
            return -1;
    return (int)n;
}

static int has_scheme(const char *h, size_t len, const char *scheme)
{
    size_t n = strlen(scheme);
    if (len <= n || h[n] != ' ')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != scheme[i])
            return 0;
    }
    return 1;
}

/* Moves *v past leading spaces and returns the length left of n without
 * the trailing ones. */
static size_t trim_spaces(const char **v, size_t n)
{
    while (n && **v == ' ') {
        (*v)++;
        n--;
    }
    while (n && (*v)[n - 1] == ' ')
        n--;
    return n;
}

int auth_check(const char *header, const char *token)
{
    if (!token || !token[0])
        return 1;
    if (!header)
        return 0;
    size_t len = strnlen(header, AUTH_HEADER_MAX + 1);
    if (len > AUTH_HEADER_MAX)
        return 0;
    size_t tlen = strlen(token);

    if (has_scheme(header, len, "bearer")) {
        const char *v = header + 7;
        size_t vlen = trim_spaces(&v, len - 7);
        return auth_equal(v, vlen, token, tlen);
    }
    if (has_scheme(header, len, "basic")) {
        const char *v = header + 6;
        size_t vlen = trim_spaces(&v, len - 6);
        char plain[AUTH_HEADER_MAX];
        int n = auth_base64_decode(v, vlen, plain, sizeof plain);
        if (n < 0)
            return 0;
        const char *colon = memchr(plain, ':', (size_t)n);
        if (!colon)
            return 0;
        const char *pw = colon + 1;
        return auth_equal(pw, (size_t)(plain + n - pw), token, tlen);
    }
    return 0;
}
