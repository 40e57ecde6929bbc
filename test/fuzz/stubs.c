/*
 * What the fuzz targets link instead of the agent's endpoints: a routes
 * table with the real names (so path lookups walk a table of the real
 * shape) and handlers that are never called.
 */
#include "http/http.h"

static void never(struct request *r)
{
    (void)r;
    __builtin_trap();
}

const struct route routes[] = {
    {"allocs", never, "", 0, 1},  {"heap", never, "", 0, 1},
    {"block", never, "", 0, 1},   {"mutex", never, "", 0, 1},
    {"cmdline", never, "", 0, 1}, {"profile", never, "", 0, 1},
    {"symbol", never, "", 0, 0},  {"threadcreate", never, "", 0, 1},
    {"goroutine", never, "", 0, 1},
};
const size_t route_count = sizeof routes / sizeof routes[0];

/* No descriptor registry: http_wait finds no client socket. */
#include "agent/fds.h"

int fds_next(int after, enum fds_kind kind)
{
    (void)after;
    (void)kind;
    return -1;
}
