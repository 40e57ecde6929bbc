/*
 * The wall-clock profile (/debug/pprof/wall): what every host thread was
 * doing, running or blocked, as a proto with two values per sample (looks,
 * wall nanoseconds) and the labels thread, state and syscall, so that
 * -tagfocus=state=sleeping is the off-CPU profile. Runs on the agent's
 * server threads only.
 */
#include "encoder/encoder.h"

#include <errno.h>

int wall_profile_proto(const struct wall_record *recs, size_t n,
                       int64_t period_ns, int64_t time_nanos,
                       int64_t duration_nanos, const char *comment,
                       struct pbuf *out)
{
    struct profile *p = profile_timed("wall", period_ns, time_nanos,
                                      duration_nanos, comment);
    if (!p)
        return -ENOMEM;
    profile_default_sample_type(p, "wall");

    struct stack_encoder *se = stacks_begin(p);
    if (!se) {
        profile_free(p);
        return -ENOMEM;
    }
    uint64_t ids[256];
    for (size_t i = 0; i < n; i++) {
        size_t depth = (size_t)recs[i].depth;
        if (depth > sizeof ids / sizeof ids[0])
            depth = sizeof ids / sizeof ids[0];
        size_t nids = stacks_locations(se, recs[i].pcs, depth, ids);
        struct profile_label labels[3] = {
            {.key = "thread", .str = recs[i].thread},
            {.key = "state", .str = recs[i].state},
            {.key = "syscall", .str = recs[i].syscall},
        };
        size_t nlabels = recs[i].syscall ? 3 : 2;
        int64_t values[2] = {recs[i].count, recs[i].wall_ns};
        profile_sample(p, ids, nids, values, 2, labels, nlabels);
    }
    stacks_end(se);
    int err = profile_write_gzip(p, out);
    profile_free(p);
    return err;
}
