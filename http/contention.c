/*
 * /debug/pprof/block and /debug/pprof/mutex, from the tables that
 * agent/locks/contention.c fills: parameters as Go's named profiles (debug=1
 * text, seconds=N delta through two snapshots), written by
 * encoder/contention.c, which scales the values as Go does.
 */
#include "http/http.h"

#include "agent/locks/contention.h"
#include "agent/stacks/stack_table.h"
#include "encoder/encoder.h"

long block_count(const char *name)
{
    (void)name;
    return (long)stack_table_count(block_table);
}

long mutex_count(const char *name)
{
    (void)name;
    return (long)stack_table_count(mutex_table);
}

static void serve(struct request *r, const char *name, struct stack_table *t,
                  int is_mutex)
{
    struct table_read tr;
    if (http_table_snapshot(r, t, &tr) != 0)
        return;
    struct pbuf out = {0};
    int err = contention_write(is_mutex, &tr.snap, &tr.o, &out);
    http_reply(r, name, &tr.o, err, &out);
    stack_snapshot_free(&tr.snap);
}

void handle_block(struct request *r)
{
    serve(r, "block", block_table, 0);
}

void handle_mutex(struct request *r)
{
    serve(r, "mutex", mutex_table, 1);
}
