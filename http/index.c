/*
 * /debug/pprof/: the HTML index, laid out as Go's (every profile with its
 * count and a link to its text form, sorted by name, then the
 * descriptions), followed by the settings in force, which Go has no need
 * to show but an operator of a native process does.
 */
#include "http/http.h"
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/custom/custom.h"
#include "agent/locks/deadlock.h"
#include "agent/log.h"
#include "agent/symbols/symbols.h"
#include "encoder/encoder.h"

#include <stdlib.h>
#include <string.h>

static void put_word_setting(struct pbuf *b, const char *name,
                             const char *value, const char *meaning)
{
    pbuf_printf(b, "<tr><td>%s</td><td>%s</td><td>%s</td></tr>\n", name,
                value, meaning);
}

static void put_setting(struct pbuf *b, const char *name, long value,
                        const char *meaning)
{
    char v[24];
    log_snprintf(v, sizeof v, "%ld", value);
    put_word_setting(b, name, v, meaning);
}

/* The loaded objects whose functions profiles cannot name, gathered with
 * the symbolizer's lock held, written after (their packages are looked up
 * without it). */
#define UNNAMED_MAX 64

struct unnamed {
    char *path[UNNAMED_MAX];
    char *line[UNNAMED_MAX];
    size_t n;
};

static void add_unnamed(void *arg, const char *path, const char *build_id,
                        int exported_only)
{
    struct unnamed *u = arg;
    if (u->n == UNNAMED_MAX)
        return;
    char line[512];
    log_snprintf(line, sizeof line, " (build ID %s): %s",
                 build_id[0] ? build_id : "none",
                 exported_only ? "exported functions only" : "no symbols");
    u->path[u->n] = strdup(path);
    u->line[u->n] = strdup(line);
    if (u->path[u->n] && u->line[u->n])
        u->n++;
    else
        real_free(u->path[u->n]), real_free(u->line[u->n]);
}

/* One row per object, with the Debian package that would name it. */
static void put_unnamed(struct pbuf *b)
{
    struct unnamed u = {0};
    symbols_list_unnamed(add_unnamed, &u);
    const char *pkgs[UNNAMED_MAX];
    symbols_packages((const char *const *)u.path, u.n, pkgs);
    for (size_t i = 0; i < u.n; i++) {
        pbuf_puts(b, "<li>");
        http_html_escape(b, u.path[i]);
        http_html_escape(b, u.line[i]);
        if (pkgs[i]) {
            pbuf_puts(b, "; names: <code>apt install ");
            http_html_escape(b, pkgs[i]);
            pbuf_puts(b, "-dbgsym</code>");
        }
        pbuf_puts(b, "</li>\n");
        real_free(u.path[i]);
        real_free(u.line[i]);
    }
    if (u.n == 0)
        pbuf_puts(b, "<li>none</li>\n");
}

static void put_item(struct pbuf *b, const char *open, const char *x,
                     const char *middle, const char *y, const char *close);

/* One row per kind of profile the agent noted (encoder/notes.c). */
static void put_note(void *arg, const char *kind, const char *text)
{
    put_item(arg, "<li>", kind, ": ", text, "</li>\n");
}

/* open, x, middle, y, close, with x and y escaped. */
static void put_item(struct pbuf *b, const char *open, const char *x,
                     const char *middle, const char *y, const char *close)
{
    pbuf_puts(b, open);
    http_html_escape(b, x);
    pbuf_puts(b, middle);
    http_html_escape(b, y);
    pbuf_puts(b, close);
}

void handle_index(struct request *r)
{
    const struct route *sorted[ROUTES_MAX + CUSTOM_MAX_PROFILES];
    struct route custom[CUSTOM_MAX_PROFILES];
    size_t n = routes_listed(sorted, custom);

    struct pbuf b = {0};
    pbuf_puts(&b, "<html>\n<head>\n<title>/debug/pprof/</title>\n"
                  "<style>\n.profile-name{\n\tdisplay:inline-block;\n"
                  "\tmin-width:6rem;\n\tpadding-right:0.5em;\n}\n</style>\n</head>\n<body>\n"
                  "/debug/pprof/<br>\n<br>\nTypes of profiles available:\n"
                  "<table>\n<thead><td>Count</td><td>Profile</td></thead>\n");
    for (size_t i = 0; i < n; i++) {
        long count = sorted[i]->count ? sorted[i]->count(sorted[i]->name) : 0;
        pbuf_printf(&b, "<tr><td>%ld</td><td>", count);
        put_item(&b, "<a href='", sorted[i]->name, "?debug=1'>",
                 sorted[i]->name, "</a></td></tr>\n");
    }
    pbuf_puts(&b, "</table>\n<a href='goroutine?debug=2'>full goroutine "
                  "stack dump</a>\n<br>\n<p>\nProfile Descriptions:\n<ul>\n");
    for (size_t i = 0; i < n; i++)
        put_item(&b, "<li><div class=profile-name>", sorted[i]->name,
                 ": </div> ", sorted[i]->description, "</li>\n");
    pbuf_puts(&b, "</ul>\n</p>\n<p>\nFlame graphs (SVG, open in a "
                  "browser):\n<ul>\n");
    for (size_t i = 0; i < n; i++) {
        if (!(sorted[i]->flags & ROUTE_PROFILE))
            continue;
        char end[64] = "</a></li>\n";
        if (sorted[i]->flags & ROUTE_CPU)
            log_snprintf(end, sizeof end, " (CPU, %d s)</a></li>\n",
                         sorted[i]->default_seconds);
        put_item(&b, "<li><a href='flamegraph?profile=", sorted[i]->name,
                 "'>", sorted[i]->name, end);
    }
    pbuf_puts(&b, "</ul>\nThe process at a glance: <a href='../stats'>"
                  "/debug/stats</a> (JSON) and <a href='../charts'>"
                  "/debug/charts</a> (live charts).\n</p>\n");
    pbuf_puts(&b, "<p>\nWhere the resident memory goes: <a href='../memory'>"
                  "/debug/memory</a> (RSS in parts that add up to it, "
                  "the allocator's view, the sampled heap with its error "
                  "bar, the top allocation sites; <a href='../memory?"
                  "format=json'>JSON</a>).\n</p>\n");
    pbuf_puts(&b, "<p>\nSettings in force (pprofagent):\n"
                  "<table>\n<thead><td>Setting</td><td>Value</td>"
                  "<td>Meaning</td></thead>\n");
    put_setting(&b, "PPROF_HEAP_RATE", opt_heap_rate,
                opt_heap_rate ? "mean bytes between heap samples"
                              : "heap sampling off");
    put_setting(&b, "PPROF_CPU_HZ", opt_cpu_hz,
                "CPU samples per second of CPU time per thread");
    put_setting(&b, "PPROF_WALL_HZ", opt_wall_hz,
                "wall profile ticks per second");
    put_setting(&b, "PPROF_WALL_COST", opt_wall_cost,
                opt_wall_cost ? "wall profile's CPU time at most N thousandths "
                                "of the process's"
                              : "wall profile's cost not limited");
    put_setting(&b, "PPROF_MUTEX_FRACTION", opt_mutex_fraction,
                opt_mutex_fraction ? "1 in N contended unlocks recorded"
                                   : "mutex profile off");
    put_setting(&b, "PPROF_BLOCK_RATE", opt_block_rate,
                opt_block_rate ? "one blocking event per N ns blocked"
                               : "block profile off");
    put_setting(&b, "PPROF_DEADLOCK_SECONDS", opt_deadlock_seconds,
                "a lock cycle waiting this long is said on stderr (0: off)");
    put_word_setting(&b, "PPROF_SYMBOLS", opt_symbols_short ? "short" : "full",
                     opt_symbols_short ? "functions named without arguments "
                                         "and templates"
                                       : "functions named in full");
    static const char *const levels[] = {"quiet", "info", "debug"};
    put_word_setting(&b, "PPROF_LOG",
                     opt_log_level >= LOG_QUIET && opt_log_level <= LOG_DEBUG
                         ? levels[opt_log_level]
                         : "info",
                     "what the agent writes to standard error");
    pbuf_puts(&b, "</table>\n</p>\n");
    pbuf_puts(&b, "<p>\nThe agent's counters of its last profiles "
                  "(also in /debug/stats):\n<ul>\n");
    if (notes_each(put_note, &b) == 0)
        pbuf_puts(&b, "<li>none taken yet</li>\n");
    pbuf_puts(&b, "</ul>\n</p>\n");
    push_status_html(&b);
    processes_html(&b);
    pbuf_puts(&b, "<p>\nLoaded objects without a symbol "
                  "table (their other functions are named after the "
                  "object and their start, <code>object+0xSTART</code>; "
                  "Debian's <code>-dbgsym</code> packages, from the "
                  "debian-debug archive, give them their names; see README, "
                  "\"Stripped binaries and debug files\"):\n<ul>\n");
    put_unnamed(&b);
    pbuf_puts(&b, "</ul>\n</p>\n</body>\n</html>");
    http_send(r, 200, "text/html; charset=utf-8", NULL, b.data, b.len);
    pbuf_free(&b);
}
