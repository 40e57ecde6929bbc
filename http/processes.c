/*
 * The processes of a multi-process service: every live process of this
 * process's family announced in the run directory (agent/host/rundir.c), this
 * one included, so that the workers of nginx or PostgreSQL can be found
 * from any of them, and other programs of the same user are not.
 *
 * /debug/pprof/processes answers text/plain, one line per process,
 * "pid ppid program http://host:port/debug/pprof/" (this process marked
 * with " self" at the end), for scripts; the index page shows the same
 * as links. Runs on the agent's server threads.
 */
#include "http/http.h"
#include "http/server.h"

#include "agent/core/ops.h"
#include "encoder/encoder.h"

#include <string.h>
#include <unistd.h>

struct listing {
    struct pbuf *b;
    int html;
    int self_seen;
};

static void put_one(void *arg, const struct rundir_entry *e);

/* Lists the family, and this process even when the folder does not show
 * it: a worker that gave up root cannot read its parent's folder, and its
 * own announcement may not be written yet. */
static void list_family(struct listing *l)
{
    rundir_list(put_one, l);
    if (l->self_seen)
        return;
    struct rundir_entry e = {.pid = (int)getpid(), .ppid = (int)getppid()};
    rundir_program(e.program, sizeof e.program);
    server_address(e.addr, sizeof e.addr);
    if (e.addr[0])
        put_one(l, &e);
}

static void put_one(void *arg, const struct rundir_entry *e)
{
    struct listing *l = arg;
    int self = e->pid == (int)getpid();
    l->self_seen |= self;
    if (!l->html) {
        pbuf_printf(l->b, "%d %d %s http://%s/debug/pprof/%s\n", e->pid,
                    e->ppid, e->program, e->addr, self ? " self" : "");
        return;
    }
    pbuf_printf(l->b, "<tr><td>%d</td><td>%d</td><td>", e->pid, e->ppid);
    http_html_escape(l->b, e->program);
    pbuf_puts(l->b, "</td><td><a href='http://");
    http_html_escape(l->b, e->addr);
    pbuf_puts(l->b, "/debug/pprof/'>");
    http_html_escape(l->b, e->addr);
    pbuf_printf(l->b, "</a>%s</td></tr>\n", self ? " (this process)" : "");
}

void processes_html(struct pbuf *b)
{
    if (!opt_run_dir[0])
        return;
    pbuf_puts(b, "<p>\nProcesses of this service (family ");
    http_html_escape(b, rundir_family());
    pbuf_puts(b, " in PPROF_RUN_DIR ");
    http_html_escape(b, opt_run_dir);
    pbuf_puts(b, "):\n<table>\n<thead><td>pid</td><td>ppid</td>"
                 "<td>program</td><td>profiles</td></thead>\n");
    struct listing l = {b, 1, 0};
    list_family(&l);
    pbuf_puts(b, "</table>\n</p>\n");
}

void handle_processes(struct request *r)
{
    if (!opt_run_dir[0]) {
        http_error(r, 404, "no run directory (PPROF_RUN_DIR=off)");
        return;
    }
    struct pbuf b = {0};
    struct listing l = {&b, 0, 0};
    list_family(&l);
    if (b.oom)
        http_error(r, 500, "out of memory");
    else
        http_send_text(r, &b);
    pbuf_free(&b);
}
