/*
 * Fuzz target: request paths as dispatch sees them. Oracle: only paths
 * under /debug/pprof/ reach a route, and a route is found only for an
 * exact name of the table.
 */
#include "http/http.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    const char *name;
    enum path_kind k = path_classify(s, &name);
    if (k == PATH_NAMED || k == PATH_INDEX) {
        if (strncmp(s, "/debug/pprof/", 13) != 0 || name != s + 13)
            __builtin_trap();
        const struct route *r = path_find_route(name);
        if (r && strcmp(r->name, name) != 0)
            __builtin_trap();
        if (r && k == PATH_INDEX)
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
