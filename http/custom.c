/*
 * /debug/pprof/<name> for custom profiles (pprofagent.h,
 * agent/custom/custom.c): the keys' stacks as a count profile "<name>/count",
 * proto or debug=1 text, as Go serves a pprof.NewProfile. Like Go, no
 * deltas: the route has no ROUTE_DELTA, so ?seconds=N is answered 400.
 * The routes of custom profiles are made in routes.c. Runs on an HTTP
 * worker.
 */
#include "http/http.h"

#include "agent/custom/custom.h"

void handle_custom(struct request *r)
{
    struct pprof_profile *p = custom_profile_find(r->name);
    if (!p) {
        http_error(r, 404, "Unknown profile");
        return;
    }
    serve_count_table(r, custom_profile_name(p), custom_profile_stacks(p));
}
