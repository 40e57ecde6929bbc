/*
 * What the fuzz targets link instead of the agent's endpoints and tables:
 * the real routes registry (http/routes.c) is linked as it is, so path
 * lookups walk the real table; its handlers and counts are never called,
 * and no custom profile exists.
 */
#include "http/http.h"

#include "agent/custom/custom.h"

#define NEVER_HANDLER(name)                                                    \
    void handle_##name(struct request *r)                                      \
    {                                                                          \
        (void)r;                                                               \
        __builtin_trap();                                                      \
    }
#define NEVER_COUNT(name)                                                      \
    long name##_count(const char *n)                                           \
    {                                                                          \
        (void)n;                                                               \
        __builtin_trap();                                                      \
    }

HTTP_HANDLERS(NEVER_HANDLER)
HTTP_COUNTS(NEVER_COUNT)

size_t custom_profile_count(void)
{
    return 0;
}

struct pprof_profile *custom_profile_at(size_t i)
{
    (void)i;
    __builtin_trap();
}

struct pprof_profile *custom_profile_find(const char *name)
{
    (void)name;
    return NULL;
}

const char *custom_profile_name(const struct pprof_profile *p)
{
    (void)p;
    __builtin_trap();
}

long custom_profile_keys(const struct pprof_profile *p)
{
    (void)p;
    __builtin_trap();
}

/* No descriptor registry: http_wait finds no client socket. */
#include "agent/host/fds.h"

int fds_next(int after, enum fds_kind kind)
{
    (void)after;
    (void)kind;
    return -1;
}
