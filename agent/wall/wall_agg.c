/*
 * The wall profile's charges grouped by (stack, thread name, state, system
 * call): an array of groups found through an open-addressing index of
 * positions + 1 (0: empty), kept at most half full.
 *
 * Context: the HTTP worker holding the wall session; allocates.
 */
#include "agent/wall.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct wall_agg {
    struct wall_group *g;
    size_t n, cap;
    uint32_t *index;
    size_t slots;
};

struct wall_agg *wall_agg_new(void)
{
    return calloc(1, sizeof(struct wall_agg));
}

void wall_agg_free(struct wall_agg *a)
{
    if (!a)
        return;
    free(a->g);
    free(a->index);
    free(a);
}

const struct wall_group *wall_agg_groups(const struct wall_agg *a, size_t *n)
{
    *n = a->n;
    return a->g;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ULL;
}

static int same(const struct wall_group *a, const struct wall_group *b)
{
    return a->hash == b->hash && a->depth == b->depth &&
           a->state == b->state && a->syscall == b->syscall &&
           strcmp(a->thread, b->thread) == 0 &&
           memcmp(a->pcs, b->pcs, (size_t)a->depth * sizeof a->pcs[0]) == 0;
}

static int grow(struct wall_agg *a)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        struct wall_group *g = realloc(a->g, cap * sizeof *g);
        if (!g)
            return -ENOMEM;
        a->g = g;
        a->cap = cap;
    }
    if ((a->n + 1) * 2 > a->slots) {
        size_t slots = a->slots ? a->slots * 2 : 1024;
        uint32_t *index = calloc(slots, sizeof *index);
        if (!index)
            return -ENOMEM;
        for (size_t i = 0; i < a->n; i++) {
            size_t s = a->g[i].hash & (slots - 1);
            while (index[s])
                s = (s + 1) & (slots - 1);
            index[s] = (uint32_t)(i + 1);
        }
        free(a->index);
        a->index = index;
        a->slots = slots;
    }
    return 0;
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
    k.hash = mix(h, (uint64_t)k.syscall);

    int err = grow(a);
    if (err)
        return err;
    size_t s = k.hash & (a->slots - 1);
    for (; a->index[s]; s = (s + 1) & (a->slots - 1)) {
        struct wall_group *g = &a->g[a->index[s] - 1];
        if (same(g, &k)) {
            g->count += c->count;
            g->ns += c->ns;
            return 0;
        }
    }
    k.count = c->count;
    k.ns = c->ns;
    a->g[a->n] = k;
    a->index[s] = (uint32_t)(++a->n);
    return 0;
}
