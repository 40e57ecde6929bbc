/*
 * The wall profile's charges grouped by (stack, thread name, state, system
 * call): an array of groups, in the order first charged, found through the
 * agent's hash index (agent/core/htab.c).
 *
 * Context: the HTTP worker holding the wall session; allocates.
 */
#include "agent/wall/wall.h"

#include "agent/core/hash.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct wall_agg {
    struct group_table groups; /* of struct wall_group; first */
};

struct wall_agg *wall_agg_new(void)
{
    return group_owner_new(sizeof(struct wall_agg), sizeof(struct wall_group));
}

void wall_agg_free(struct wall_agg *a)
{
    group_owner_free(a);
}

const struct wall_group *wall_agg_groups(const struct wall_agg *a, size_t *n)
{
    *n = a->groups.n;
    return a->groups.v;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ULL;
}

static int same(const void *ctx, size_t idx, const void *key)
{
    const struct wall_group *a = group_at(ctx, idx);
    const struct wall_group *b = key;
    return a->hash == b->hash && a->depth == b->depth &&
           a->state == b->state && a->syscall == b->syscall &&
           strcmp(a->thread, b->thread) == 0 &&
           memcmp(a->pcs, b->pcs, (size_t)a->depth * sizeof a->pcs[0]) == 0;
}

int wall_agg_add(const struct wall_charge *c, void *arg)
{
    struct wall_agg *a = arg;
    struct wall_group k;
    memset(&k, 0, sizeof k);
    k.depth = c->depth > WALL_STACK_MAX ? WALL_STACK_MAX : c->depth;
    memcpy(k.pcs, c->pcs, (size_t)k.depth * sizeof k.pcs[0]);
    k.state = c->state;
    k.syscall = c->syscall;
    size_t len = strnlen(c->thread, sizeof k.thread - 1);
    memcpy(k.thread, c->thread, len);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int f = 0; f < k.depth; f++)
        h = mix(h, k.pcs[f]);
    for (size_t i = 0; i < len; i++)
        h = mix(h, (unsigned char)k.thread[i]);
    h = mix(h, (uint64_t)k.state);
    k.hash = hash_splitmix64(mix(h, (uint64_t)k.syscall));

    int added;
    struct wall_group *g =
        group_find_or_add(&a->groups, k.hash, same, &k, &added);
    if (!g)
        return -ENOMEM;
    if (added)
        *g = k;
    g->count += c->count;
    g->ns += c->ns;
    return 0;
}
