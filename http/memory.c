/*
 * /debug/memory: where the process's RSS goes (agent/heap/memory.c reads):
 * a page for a browser (memory_page.c: its Accept header names text/html)
 * and JSON for everyone else (encoder/memory.c writes it): curl, scripts,
 * the charts page's script, and ?format=json from anyone. Runs on HTTP
 * workers only.
 */
#include "http/http.h"

#include "agent/heap/memory.h"
#include "encoder/encoder.h"

#include <string.h>

void handle_memory(struct request *r)
{
    struct memory_report rep;
    if (memory_read(&rep) != 0) {
        http_error(r, 500, "cannot read /proc/self/smaps_rollup");
        return;
    }
    char format[16] = "";
    http_param(r, "format", format, sizeof format);
    const char *accept = http_header(r, "Accept");
    int page = strcmp(format, "json") != 0 &&
               (strcmp(format, "html") == 0 ||
                (accept && strstr(accept, "text/html")));
    struct pbuf b = {0};
    if ((page ? memory_page(&rep, &b) : memory_report_json(&rep, &b)) != 0)
        http_error(r, 500, "out of memory");
    else if (page)
        http_send(r, 200, "text/html; charset=utf-8", NULL, b.data, b.len);
    else
        http_send(r, 200, "application/json", NULL, b.data, b.len);
    pbuf_free(&b);
}
