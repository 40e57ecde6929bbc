/*
 * Fuzz target: query strings and urlencoded bodies as the endpoints read
 * them (http_param over civetweb's mg_get_var, the debug and seconds
 * parsers, Go's delta checks) and the integer parser behind them. The
 * input is used as a query string and as a form body.
 *
 * Oracle besides the sanitizers: a value accepted for seconds is in
 * [1, 3600]; config_parse_long never accepts outside its bounds and agrees
 * with strtol on what it accepts.
 */
#include "agent/config.h"
#include "http/http.h"
#include "test/fuzz/input.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_long(const char *s)
{
    long v = 12345;
    if (config_parse_long(s, -1000, 3600, &v) != 0)
        return;
    if (v < -1000 || v > 3600)
        __builtin_trap();
    char *end;
    errno = 0;
    long w = strtol(s, &end, 10);
    if (errno || *end || w != v)
        __builtin_trap();
}

static void one(struct request *r)
{
    char buf[64];
    long seconds = -1;
    http_param(r, "seconds", buf, sizeof buf);
    check_long(buf);
    http_param(r, "gc", buf, 4);
    http_param(r, "", buf, sizeof buf);
    int debug = http_param_debug(r);
    if (http_param_delta_seconds(r, 1, debug, &seconds) == 0 &&
        (seconds < 0 || seconds > 3600))
        __builtin_trap();
    if (http_param_delta_seconds(r, 0, 0, &seconds) == 0 && seconds != 0)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size);
    if (!s)
        return 0;
    check_long(s);

    struct request q = {.method = "GET", .name = "heap", .query = s};
    one(&q);
    struct request b = {.method = "POST", .name = "heap", .query = "",
                        .body = s, .body_len = size, .form_body = 1};
    one(&b);
    free(s);
    return 0;
}
