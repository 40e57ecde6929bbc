/*
 * /debug/pprof/symbol: address-to-name lookups in Go's format, used by pprof
 * for mappings whose locations came without names. Input is the POST body,
 * or the raw query string for any other method; tokens are separated by
 * '+', parsed with C base prefixes; unknown or zero addresses are skipped.
 */
#include "http/http.h"

#include "agent/symbols.h"
#include "encoder/encoder.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Parses one token as strtoull with base 0 would, but the whole token must
 * be a number. Returns 0 when it is not. */
static uintptr_t parse_address(const char *tok, size_t len)
{
    char buf[32];
    if (len == 0 || len >= sizeof buf)
        return 0;
    memcpy(buf, tok, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    if (errno || *end != '\0' || buf[0] == '-')
        return 0;
    return (uintptr_t)v;
}

void handle_symbol(struct request *r)
{
    const char *in;
    size_t len;
    if (strcmp(r->method, "POST") == 0) {
        in = r->body ? r->body : "";
        len = r->body ? r->body_len : 0;
    } else {
        in = r->query;
        len = strlen(r->query);
    }

    struct pbuf out = {0};
    pbuf_puts(&out, "num_symbols: 1\n");
    symbols_lock();
    symbols_refresh();
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && in[j] != '+')
            j++;
        uintptr_t addr = parse_address(in + i, j - i);
        struct sym_frame frames[8];
        int n = addr ? symbols_resolve(addr, frames, 8) : 0;
        /* The outermost frame is the function the address is in (inlined
         * callees are not what a symbolz client asks for); the name as in
         * the symbol table lets pprof demangle it its own way. */
        if (n > 0)
            pbuf_printf(&out, "%#lx %s\n", (unsigned long)addr,
                        frames[n - 1].system_name);
        i = j + 1;
    }
    symbols_unlock();
    http_send_text(r, &out);
    pbuf_free(&out);
}
