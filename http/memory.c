/*
 * /debug/memory: where the process's RSS goes, as JSON (agent/heap/memory.c
 * reads, encoder/memory.c writes). Runs on HTTP workers only.
 */
#include "http/http.h"

#include "agent/memory.h"
#include "encoder/encoder.h"

void handle_memory(struct request *r)
{
    struct memory_report rep;
    if (memory_read(&rep) != 0) {
        http_error(r, 500, "cannot read /proc/self/smaps_rollup");
        return;
    }
    struct pbuf b = {0};
    if (memory_report_json(&rep, &b) != 0)
        http_error(r, 500, "out of memory");
    else
        http_send(r, 200, "application/json", NULL, b.data, b.len);
    pbuf_free(&b);
}
