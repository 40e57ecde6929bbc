/*
 * /debug/memory for people: the breakdown of RSS as a page (a stacked bar,
 * a table of the parts with their share, the sampled heap with its error
 * bar, the allocator's and the agent's own figures) and the heap's top
 * allocation sites, which the page's script reads from
 * pprof/heap?debug=1 (the sites are the heap profile's: a table of the
 * biggest, not a second profiler). The figures are those of the JSON form
 * (encoder/memory.c), which clients that ask for JSON get instead
 * (http/memory.c). Sizes in IEC units, as the charts page's.
 *
 * Runs on HTTP workers. Not async-signal-safe.
 */
#include "http/http.h"

#include "agent/heap/memory.h"
#include "encoder/encoder.h"

#include <string.h>

static const char page_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<title>Where the resident memory goes</title>\n<style>\n"
    "body { font-family: Verdana, 'DejaVu Sans', sans-serif; margin: 16px;"
    " background: #fafaf7; color: #222; font-size: 13px; }\n"
    "h1 { font-size: 18px; margin: 0 0 4px 0; }\n"
    "h2 { font-size: 14px; margin: 16px 0 4px 0; }\n"
    ".bar { display: flex; height: 28px; border: 1px solid #ccc;"
    " background: #fff; max-width: 900px; }\n"
    ".bar div { height: 100%; }\n"
    "table { border-collapse: collapse; }\n"
    "td, th { padding: 2px 10px 2px 0; text-align: left; }\n"
    "td.n { text-align: right; font-variant-numeric: tabular-nums; }\n"
    ".key { display: inline-block; width: 10px; height: 10px;"
    " margin-right: 6px; }\n"
    ".note { color: #555; }\n"
    "</style>\n</head>\n<body>\n"
    "<h1>Where the resident memory goes</h1>\n"
    "<div class=\"note\"><a href=\"pprof/\">profiles</a> |"
    " <a href=\"charts\">live charts</a> |"
    " <a href=\"memory?format=json\">this page as JSON</a> |"
    " <a href=\"pprof/flamegraph?profile=heap\">heap flame graph</a></div>\n";

/* The parts of RSS, in the JSON's order, with their colours (the charts
 * page's) and what each is. */
struct part {
    const char *key, *label, *color, *what;
    int64_t v;
};

static void mib(struct pbuf *b, int64_t v)
{
    if (v < 0)
        pbuf_puts(b, "-");
    else
        pbuf_printf(b, "%.1f MiB", (double)v / 1048576.0);
}

static void put_row(struct pbuf *b, const char *label, int64_t v,
                    const char *what)
{
    pbuf_puts(b, "<tr><td>");
    http_html_escape(b, label);
    pbuf_puts(b, "</td><td class=n>");
    mib(b, v);
    pbuf_puts(b, "</td><td class=note>");
    http_html_escape(b, what);
    pbuf_puts(b, "</td></tr>\n");
}

static void put_parts(struct pbuf *b, const struct memory_report *r)
{
    const struct memory_parts *p = &r->parts;
    const struct part parts[] = {
        {"malloc_inuse", "malloc: in use", "#d0451b",
         "blocks the allocator has handed out", p->malloc_inuse},
        {"malloc_free", "malloc: free and fragmented", "#f0a58a",
         "resident memory the allocator holds but has not handed out",
         p->malloc_free},
        {"malloc_mmapped", "malloc: mmapped blocks", "#b07020",
         "large blocks glibc maps one by one", p->malloc_mmapped},
        {"thread_stacks", "thread stacks", "#8a3ad0",
         "the program's threads' stacks, main included", p->thread_stacks},
        {"agent", "the agent", "#2a9d3a",
         "the profiler's own tables and threads", p->agent},
        {"file_backed", "file-backed", "#1b6fd0",
         "code and mapped files", p->file_backed},
        {"other_anonymous", "other anonymous", "#999999",
         "every other anonymous page", p->other_anonymous},
    };
    size_t n = sizeof parts / sizeof parts[0];
    double total = r->rss > 0 ? (double)r->rss : 1;
    pbuf_puts(b, "<h2>RSS ");
    mib(b, r->rss);
    pbuf_puts(b, " in parts that add up to it</h2>\n<div class=bar "
                 "id=memory-bar>");
    for (size_t i = 0; i < n; i++) {
        double pct = parts[i].v > 0 ? 100.0 * (double)parts[i].v / total : 0;
        pbuf_printf(b, "<div data-part=\"%s\" style=\"width: %.2f%%; "
                       "background: %s\" title=\"%s: %.1f MiB\"></div>",
                    parts[i].key, pct, parts[i].color, parts[i].label,
                    (double)(parts[i].v > 0 ? parts[i].v : 0) / 1048576.0);
    }
    pbuf_puts(b, "</div>\n<table id=memory-parts>\n<tr><th>part</th>"
                 "<th>resident</th><th>of RSS</th><th></th></tr>\n");
    for (size_t i = 0; i < n; i++) {
        pbuf_printf(b, "<tr data-part=\"%s\"><td><span class=key "
                       "style=\"background: %s\"></span>%s</td><td class=n>",
                    parts[i].key, parts[i].color, parts[i].label);
        mib(b, parts[i].v);
        pbuf_printf(b, "</td><td class=n>%.1f%%</td><td class=note>%s"
                       "</td></tr>\n",
                    parts[i].v > 0 ? 100.0 * (double)parts[i].v / total : 0,
                    parts[i].what);
    }
    pbuf_puts(b, "</table>\n");
}

static void put_details(struct pbuf *b, const struct memory_report *r)
{
    pbuf_puts(b, "<h2>The sampled heap</h2>\n<p>");
    if (r->heap_rate > 0) {
        pbuf_puts(b, "In use by the heap profile's estimate: ");
        mib(b, r->sampled_inuse);
        pbuf_puts(b, " &plusmn; ");
        mib(b, 2 * (r->sampled_stddev > 0 ? r->sampled_stddev : 0));
        pbuf_printf(b, " (2&sigma;; %ld live samples, one per %ld bytes "
                       "allocated on average).",
                    r->sampled_live, r->heap_rate);
    } else {
        pbuf_puts(b, "Heap sampling is off (PPROF_HEAP_RATE=0).");
    }
    pbuf_puts(b, "</p>\n<h2>The allocator (");
    http_html_escape(b, r->alloc.name ? r->alloc.name : "?");
    pbuf_puts(b, ") and the agent</h2>\n<table>\n");
    const struct allocator_view *a = &r->alloc;
    if (a->name && strcmp(a->name, "glibc") == 0) {
        put_row(b, "arenas", a->arena, "memory glibc's arenas hold");
        put_row(b, "in use", a->uordblks, "handed out from the arenas");
        put_row(b, "free", a->fordblks, "free in the arenas");
        put_row(b, "mmapped", a->hblkhd, "large blocks mapped one by one");
    } else {
        put_row(b, "allocated", a->allocated, "handed out");
        put_row(b, "resident", a->resident, "the allocator's resident pages");
        put_row(b, "mapped", a->mapped, "the allocator's mappings");
        put_row(b, "heap", a->heap_size, "tcmalloc's heap");
    }
    put_row(b, "trimmable", r->malloc_trimmable,
            "free and resident: what malloc_trim could give back");
    put_row(b, "the agent, resident", r->agent_resident,
            "the profiler's own mappings and thread stacks");
    put_row(b, "the agent, mapped", r->agent_mapped, "reserved, not all touched");
    pbuf_puts(b, "</table>\n");
}

/* The heap profile's biggest sites, by bytes in use, from its text form. */
static const char sites_script[] =
    "<h2>Top allocation sites (bytes in use, the heap profile's estimate)"
    "</h2>\n"
    "<table id=memory-sites><tr><td class=note>reading "
    "pprof/heap?debug=1...</td></tr></table>\n"
    "<script>\n"
    "(function () {\n"
    "function size(v) {\n"
    "  var u = ['B', 'KiB', 'MiB', 'GiB'], i = 0;\n"
    "  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }\n"
    "  return (i ? v.toFixed(1) : v.toFixed(0)) + ' ' + u[i];\n"
    "}\n"
    "fetch('pprof/heap?debug=1', {cache: 'no-store'}).then(function (r) {\n"
    "  if (!r.ok) throw new Error('HTTP ' + r.status);\n"
    "  return r.text();\n"
    "}).then(function (text) {\n"
    "  var sites = [], cur = null, rate = 0;\n"
    "  /* The text holds the samples as taken; like pprof, the page\n"
    "   * unsamples them (Go's header gives twice the mean bytes between\n"
    "   * samples: heap/2R). */\n"
    "  var hdr = /@ heap\\/(\\d+)/.exec(text);\n"
    "  if (hdr) rate = +hdr[1] / 2;\n"
    "  text.split('\\n').forEach(function (line) {\n"
    "    var m = /^(\\d+): (\\d+) \\[\\d+: \\d+\\] @/.exec(line);\n"
    "    if (m) {\n"
    "      var k = 1, n = +m[1], b = +m[2];\n"
    "      if (rate > 0 && n > 0) k = 1 / (1 - Math.exp(-b / n / rate));\n"
    "      cur = {objects: Math.round(n * k), bytes: b * k, frames: []};\n"
    "      sites.push(cur);\n"
    "      return;\n"
    "    }\n"
    "    var f = /^#\\t0x[0-9a-f]+\\t(\\S+?)(\\+0x[0-9a-f]+)?\\t/.exec(line);\n"
    "    if (f && cur && cur.frames[cur.frames.length - 1] !== f[1])\n"
    "      cur.frames.push(f[1]);\n"
    "    if (!line) cur = null;\n"
    "  });\n"
    "  sites = sites.filter(function (s) { return s.bytes > 0; });\n"
    "  sites.sort(function (a, b) { return b.bytes - a.bytes; });\n"
    "  var t = document.getElementById('memory-sites');\n"
    "  t.textContent = '';\n"
    "  var h = t.insertRow();\n"
    "  ['in use', 'objects', 'allocated at (innermost first)'].forEach("
    "function (s) {\n"
    "    var th = document.createElement('th'); th.textContent = s;\n"
    "    h.appendChild(th);\n"
    "  });\n"
    "  sites.slice(0, 10).forEach(function (s) {\n"
    "    var row = t.insertRow();\n"
    "    row.className = 'site';\n"
    "    var c = row.insertCell(); c.className = 'n';"
    " c.textContent = size(s.bytes);\n"
    "    c = row.insertCell(); c.className = 'n';"
    " c.textContent = String(s.objects);\n"
    "    row.insertCell().textContent = s.frames.slice(0, 4).join("
    "' \\u2190 ') || '?';\n"
    "  });\n"
    "  if (!sites.length)\n"
    "    t.insertRow().insertCell().textContent = 'no sampled block in use"
    " (or heap sampling is off)';\n"
    "}).catch(function (e) {\n"
    "  document.getElementById('memory-sites').textContent =\n"
    "    'no answer from pprof/heap (' + e.message + ')';\n"
    "});\n"
    "})();\n"
    "</script>\n";

int memory_page(const struct memory_report *r, struct pbuf *b)
{
    pbuf_puts(b, page_head);
    put_parts(b, r);
    put_details(b, r);
    pbuf_puts(b, sites_script);
    pbuf_puts(b, "</body>\n</html>\n");
    return b->oom ? -1 : 0;
}
