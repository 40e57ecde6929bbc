/*
 * /debug/pprof/wall?seconds=N: a wall-clock profile over N seconds
 * (default 30). Every host thread is looked at, whatever it is doing, at
 * PPROF_WALL_HZ ticks a second (agent/wall/wall_run.c, wall_look.c):
 * running ones through their own CPU-time timers' stacks, blocked ones
 * walked where they stand; no thread is ever sent a signal by anyone but
 * its own CPU clock. One profile at a time, as the CPU profile: a second
 * request gets 500. A client that goes away ends the profile.
 *
 * Runs on an HTTP worker for the length of the profile.
 */
#include "http/http.h"

#include "agent/wall/wall.h"
#include "encoder/encoder.h"

#include <errno.h>

static int client_gone(void *r)
{
    return http_client_gone(r);
}

void handle_wall(struct request *r)
{
    long seconds = 30;
    if (http_param_seconds(r, &seconds) < 0)
        return;
    struct wall_agg *agg = wall_agg_new();
    struct wall_run run;
    int err = agg ? wall_run(seconds, agg, client_gone, r, &run) : -ENOMEM;
    if (err != 0 && !(agg && run.started)) {
        http_error(r, 500,
                   err == -EBUSY
                       ? "Could not enable wall profiling: wall profiling "
                         "already in use"
                   : err == -EAGAIN
                       ? "Could not enable wall profiling: every real-time "
                         "signal is in use by the program"
                       : "Could not enable wall profiling: out of memory");
        wall_agg_free(agg);
        return;
    }
    struct pbuf out = {0};
    if (err == 0 && !run.gone)
        err = wall_write(agg, &run, &out);
    wall_agg_free(agg);
    if (err != 0)
        http_error(r, 500, "failed to collect profile");
    else if (!run.gone)
        http_send_profile(r, "wall", &out);
    pbuf_free(&out);
}
