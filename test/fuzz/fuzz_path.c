/*
 * Fuzz target: request paths as dispatch sees them. Oracle: only paths
 * under /debug/pprof/ reach a profile's route, only /debug/NAME (no
 * further slash) reaches a route flagged ROUTE_BESIDE, and a route is found
 * only for an exact name of the registry (routes.c, linked as it is).
 */
#include "http/http.h"
#include "test/fuzz/input.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, size);
    if (!s)
        return 0;
    const char *name;
    enum path_kind k = path_classify(s, &name);
    if (k == PATH_NAMED || k == PATH_INDEX) {
        if (strncmp(s, "/debug/pprof/", 13) != 0 || name != s + 13)
            __builtin_trap();
        const struct route *r = routes_find(name, 0, NULL);
        if (r && (strcmp(r->name, name) != 0 || (r->flags & ROUTE_BESIDE)))
            __builtin_trap();
        if (r && k == PATH_INDEX)
            __builtin_trap();
    } else if (k == PATH_BESIDE) {
        if (strncmp(s, "/debug/", 7) != 0 || name != s + 7 || !name[0] ||
            strchr(name, '/'))
            __builtin_trap();
        const struct route *r = routes_find(name, 1, NULL);
        if (r && (strcmp(r->name, name) != 0 || !(r->flags & ROUTE_BESIDE)))
            __builtin_trap();
    } else if (k == PATH_REDIRECT) {
        if (strcmp(s, "/debug/pprof") != 0)
            __builtin_trap();
    } else if (strncmp(s, "/debug/pprof/", 13) == 0) {
        __builtin_trap();
    }
    free(s);
    return 0;
}
