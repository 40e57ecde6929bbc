/*
 * /debug/pprof/<name> for custom profiles (pprofagent.h,
 * agent/custom.c): the keys' stacks as a count profile "<name>/count",
 * proto or debug=1 text, as Go serves a pprof.NewProfile. Like Go, no
 * deltas: ?seconds=N is answered 400. Runs on an HTTP worker.
 */
#include "http/http.h"

#include "agent/agent.h"
#include "agent/custom.h"
#include "encoder/encoder.h"

#include <stdlib.h>
#include <string.h>

int custom_profile_serve(struct request *r)
{
    struct pprof_profile *p = custom_profile_find(r->name);
    if (!p)
        return 0;
    long seconds;
    if (http_param_delta_seconds(r, 0, http_param_debug(r), &seconds) != 0)
        return 1;
    serve_count_table(r, custom_profile_name(p), custom_profile_stacks(p));
    return 1;
}

static int by_profile_name(const void *a, const void *b)
{
    return strcmp(custom_profile_name(*(struct pprof_profile *const *)a),
                  custom_profile_name(*(struct pprof_profile *const *)b));
}

void custom_index_rows(struct pbuf *b, int descriptions, const char *before,
                       size_t *pos)
{
    struct pprof_profile *list[CUSTOM_MAX_PROFILES];
    size_t n = custom_profile_count();
    for (size_t i = 0; i < n; i++)
        list[i] = custom_profile_at(i);
    qsort(list, n, sizeof list[0], by_profile_name);
    /* Names are letters, digits and . _ - / + only: nothing to escape. */
    for (; *pos < n; (*pos)++) {
        const char *name = custom_profile_name(list[*pos]);
        if (before && strcmp(name, before) >= 0)
            break;
        if (descriptions)
            pbuf_printf(b, "<li><div class=profile-name>%s: </div> </li>\n",
                        name);
        else
            pbuf_printf(b, "<tr><td>%ld</td><td><a href='%s?debug=1'>%s"
                           "</a></td></tr>\n",
                        custom_profile_keys(list[*pos]), name, name);
    }
}
