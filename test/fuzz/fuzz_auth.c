/*
 * Fuzz target: the Authorization header against a token. The first input
 * byte chooses the token length, the token is taken from the next bytes
 * (made printable as PPROF_TOKEN must be), the rest is the header.
 * Oracles: "Bearer TOKEN" and basic auth with TOKEN as password pass;
 * no token never passes a header that lacks it; base64 round trips.
 */
#include "http/http.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t b64(const char *in, size_t n, char *out)
{
    static const char t[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned char)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned char)in[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)in[i + 2];
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t tlen = 1 + data[0] % 40;
    if (size < 1 + tlen)
        return 0;
    char token[64];
    for (size_t i = 0; i < tlen; i++)
        token[i] = (char)(33 + data[1 + i] % 94);
    token[tlen] = '\0';
    size_t hlen = size - 1 - tlen;
    char *header = malloc(hlen + 1);
    if (!header)
        return 0;
    memcpy(header, data + 1 + tlen, hlen);
    header[hlen] = '\0';

    int ok = auth_check(header, token);
    if (ok && !strstr(header, token) &&
        strncasecmp(header, "basic ", 6) != 0)
        __builtin_trap(); /* a bearer pass must contain the token */
    if (!auth_check(header, ""))
        __builtin_trap(); /* no token configured: everything passes */

    /* The header's bytes as a user name, the token as password. */
    char plain[300], enc[420], line[440];
    size_t ulen = strnlen(header, 100);
    for (size_t i = 0; i < ulen; i++)
        plain[i] = header[i] == ':' ? '_' : header[i];
    plain[ulen] = ':';
    memcpy(plain + ulen + 1, token, tlen);
    size_t plen = ulen + 1 + tlen;
    b64(plain, plen, enc);
    snprintf(line, sizeof line, "Basic %s", enc);
    if (!auth_check(line, token))
        __builtin_trap();
    char dec[300];
    if (auth_base64_decode(enc, strlen(enc), dec, sizeof dec) != (int)plen ||
        memcmp(dec, plain, plen) != 0)
        __builtin_trap();
    snprintf(line, sizeof line, "Bearer %s", token);
    if (!auth_check(line, token))
        __builtin_trap();
    line[strlen(line) - 1] ^= 1; /* one byte off */
    if (auth_check(line, token))
        __builtin_trap();
    auth_base64_decode(header, hlen, dec, sizeof dec);
    free(header);
    return 0;
}
