/*
 * /debug/pprof/symbol: address-to-name lookups in Go's format, used by pprof
 * for mappings whose locations came without names. Input is the POST body,
 * or the raw query string for any other method; tokens are separated by
 * '+', parsed with C base prefixes; unknown or zero addresses are skipped.
 */
#include "http/http.h"

#include "agent/symbols/symbols.h"
#include "encoder/encoder.h"

#include <stdlib.h>
#include <string.h>

/* The outermost frame is the function the address is in (inlined callees
 * are not what a symbolz client asks for); the name as in the symbol table
 * lets pprof demangle it its own way. */
static void resolve_one(uintptr_t addr, void *ctx)
{
    struct pbuf *out = ctx;
    struct sym_frame frames[8];
    int n = symbols_resolve(addr, frames, 8);
    if (n > 0)
        pbuf_printf(out, "%#lx %s\n", (unsigned long)addr,
                    frames[n - 1].system_name);
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
    symbol_parse(in, len, resolve_one, &out);
    symbols_unlock();
    http_send_text(r, &out);
    pbuf_free(&out);
}
