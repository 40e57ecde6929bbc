/*
 * Fuzz target: the symbolz request body (POST) or query (GET) as
 * /debug/pprof/symbol parses it: '+'-separated tokens with C base
 * prefixes. Oracle: every address handed on is nonzero and is the value of
 * one whole token of the input, read back with strtoull.
 */
#include "http/http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    const char *in;
    size_t len;
    size_t count;
};

static void got(uintptr_t addr, void *ctx)
{
    struct seen *s = ctx;
    if (addr == 0)
        __builtin_trap();
    /* The address must be the value of some token. */
    size_t i = 0;
    while (i <= s->len) {
        size_t j = i;
        while (j < s->len && s->in[j] != '+')
            j++;
        char tok[40];
        if (j - i < sizeof tok) {
            memcpy(tok, s->in + i, j - i);
            tok[j - i] = '\0';
            char *end;
            if (tok[0] && strtoull(tok, &end, 0) == addr && *end == '\0') {
                s->count++;
                return;
            }
        }
        i = j + 1;
    }
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct seen s = {(const char *)data, size, 0};
    symbol_parse((const char *)data, size, got, &s);
    return 0;
}
