/*
 * /debug/charts: one self-contained HTML page (inline style and script, no
 * external resource of any kind) that polls /debug/stats once a second and
 * draws live line charts of the sampled heap in use, RSS, CPU and threads,
 * for the last five minutes it has been open (the window is at least a
 * minute wide). The page is static: all the
 * work is in the browser, and each poll costs the process one /debug/stats.
 *
 * Every figure is non-negative, and the y-axis runs from zero to a round
 * value above the highest (at least a minimum span per chart: one thread,
 * 1% of a core, 1 KiB), so a dip from 82.8 to 81.2 MiB looks like the 2%
 * it is, a flat line sits below the top, and the two labels differ. Sizes
 * are in IEC units (KiB, MiB, GiB), as /debug/memory's. The x-axis is
 * labelled in time before now.
 *
 * Runs on HTTP workers; sends a constant string.
 */
#include "http/http.h"

#include "encoder/encoder.h"

#include <string.h>

static const char charts_page[] =
    "<!DOCTYPE html>\n"
    "<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<title>pprofagent live charts</title>\n"
    "<style>\n"
    "body { font-family: Verdana, 'DejaVu Sans', sans-serif; margin: 16px;"
    " background: #fafaf7; color: #222; }\n"
    "h1 { font-size: 18px; margin: 0 0 4px 0; }\n"
    "#info, #links { font-size: 12px; color: #555; margin-bottom: 8px; }\n"
    ".grid { display: grid; grid-template-columns: repeat(2, 1fr);"
    " gap: 12px; }\n"
    ".chart { background: #fff; border: 1px solid #ddd; padding: 8px; }\n"
    ".chart h2 { font-size: 13px; margin: 0; display: flex;"
    " justify-content: space-between; }\n"
    ".chart .now { font-weight: bold; }\n"
    ".chart svg { width: 100%; height: 160px; display: block; }\n"
    ".axis { font-size: 10px; fill: #777; }\n"
    "#status.down { color: #b00; }\n"
    "</style>\n</head>\n<body>\n"
    "<h1>pprofagent live charts</h1>\n"
    "<div id=\"info\"><span id=\"status\">connecting...</span></div>\n"
    "<div id=\"links\"><a href=\"pprof/\">profiles</a> |"
    " <a href=\"stats\">stats (JSON)</a> | flame graphs:"
    " <a href=\"pprof/flamegraph?profile=profile\">CPU (10 s)</a>"
    " <a href=\"pprof/flamegraph?profile=heap\">heap</a>"
    " <a href=\"pprof/flamegraph?profile=allocs\">allocs</a>"
    " <a href=\"pprof/flamegraph?profile=block\">block</a>"
    " <a href=\"pprof/flamegraph?profile=mutex\">mutex</a></div>\n"
    "<div class=\"grid\" id=\"grid\"></div>\n"
    "<script>\n"
    "(function () {\n"
    "var KEEP = 300, W = 600, H = 160, PAD = 4, TIME = 14;\n"
    "function bytes(v) {\n"
    "  var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;\n"
    "  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }\n"
    "  return (i ? v.toFixed(1) : v.toFixed(0)) + ' ' + u[i];\n"
    "}\n"
    "/* The smallest of 1, 2, 2.5, 5 times a power of ten at or above v\n"
    " * (in the unit of the chart: a power of 1024 for sizes). */\n"
    "function roundUp(v, base) {\n"
    "  var s = 1;\n"
    "  if (base) while (v / s >= 1024) s *= 1024;\n"
    "  var x = v / s, p = Math.pow(10, Math.floor(Math.log10(x)));\n"
    "  var m = [1, 2, 2.5, 5, 10].find(function (k) { return k * p >= x; });\n"
    "  return m * p * s;\n"
    "}\n"
    "function pct(v) { return v.toFixed(1) + '%'; }\n"
    "function num(v) { return String(Math.round(v)); }\n"
    "function ago(s) {\n"
    "  return s < 120 ? s + ' s' : (s / 60).toFixed(s % 60 ? 1 : 0) +"
    " ' min';\n"
    "}\n"
    "var charts = [\n"
    "  {id: 'heap', title: 'Heap in use (sampled)', key: 'heap_inuse_bytes',"
    " fmt: bytes, color: '#d0451b', least: 1024, iec: 1},\n"
    "  {id: 'rss', title: 'Resident memory (RSS)', key: 'rss_bytes',"
    " fmt: bytes, color: '#1b6fd0', least: 1024, iec: 1},\n"
    "  {id: 'cpu', title: 'CPU (% of one core)', key: 'cpu_percent',"
    " fmt: pct, color: '#2a9d3a', least: 1},\n"
    "  {id: 'threads', title: 'Threads', key: 'threads', fmt: num,"
    " color: '#8a3ad0', least: 1}\n"
    "];\n"
    "var NS = 'http://www.w3.org/2000/svg';\n"
    "var grid = document.getElementById('grid');\n"
    "charts.forEach(function (c) {\n"
    "  var div = document.createElement('div');\n"
    "  div.className = 'chart';\n"
    "  div.id = 'chart-' + c.id;\n"
    "  var h = document.createElement('h2');\n"
    "  var t = document.createElement('span'); t.textContent = c.title;\n"
    "  c.now = document.createElement('span'); c.now.className = 'now';\n"
    "  c.now.textContent = '-';\n"
    "  h.appendChild(t); h.appendChild(c.now); div.appendChild(h);\n"
    "  c.svg = document.createElementNS(NS, 'svg');\n"
    "  c.svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);\n"
    "  c.svg.setAttribute('preserveAspectRatio', 'none');\n"
    "  c.line = document.createElementNS(NS, 'polyline');\n"
    "  c.line.setAttribute('fill', 'none');\n"
    "  c.line.setAttribute('stroke', c.color);\n"
    "  c.line.setAttribute('stroke-width', '2');\n"
    "  c.line.setAttribute('class', 'series');\n"
    "  c.max = document.createElementNS(NS, 'text');\n"
    "  c.max.setAttribute('class', 'axis'); c.max.setAttribute('x', PAD);\n"
    "  c.max.setAttribute('y', 12);\n"
    "  c.min = document.createElementNS(NS, 'text');\n"
    "  c.min.setAttribute('class', 'axis'); c.min.setAttribute('x', PAD);\n"
    "  c.min.setAttribute('y', H - TIME - 2);\n"
    "  c.t0 = document.createElementNS(NS, 'text');\n"
    "  c.t0.setAttribute('class', 'axis time');\n"
    "  c.t0.setAttribute('x', PAD); c.t0.setAttribute('y', H - 2);\n"
    "  c.t1 = document.createElementNS(NS, 'text');\n"
    "  c.t1.setAttribute('class', 'axis time');\n"
    "  c.t1.setAttribute('x', W - PAD); c.t1.setAttribute('y', H - 2);\n"
    "  c.t1.setAttribute('text-anchor', 'end'); c.t1.textContent = 'now';\n"
    "  c.svg.appendChild(c.line); c.svg.appendChild(c.max);\n"
    "  c.svg.appendChild(c.min); c.svg.appendChild(c.t0);\n"
    "  c.svg.appendChild(c.t1);\n"
    "  div.appendChild(c.svg); grid.appendChild(div);\n"
    "  c.data = [];\n"
    "});\n"
    "function draw(c) {\n"
    "  var d = c.data, n = d.length;\n"
    "  c.svg.setAttribute('data-points', n);\n"
    "  if (!n) return;\n"
    "  var lo = 0, hi = roundUp(Math.max(Math.max.apply(null, d) * 1.05,"
    " c.least), c.iec);\n"
    "  var pts = [], span = Math.max(n, 60);\n"
    "  for (var i = 0; i < n; i++) {\n"
    "    var x = W - (n - 1 - i) * (W / (span - 1));\n"
    "    var y = H - TIME - (d[i] - lo) / (hi - lo) * (H - TIME - PAD - 12);\n"
    "    pts.push(x.toFixed(1) + ',' + y.toFixed(1));\n"
    "  }\n"
    "  c.line.setAttribute('points', pts.join(' '));\n"
    "  c.t0.textContent = ago(span - 1) + ' ago';\n"
    "  c.max.textContent = c.fmt(hi);\n"
    "  c.min.textContent = c.fmt(lo);\n"
    "  c.now.textContent = c.fmt(d[n - 1]);\n"
    "}\n"
    "var status = document.getElementById('status');\n"
    "function poll() {\n"
    "  fetch('stats', {cache: 'no-store'}).then(function (r) {\n"
    "    if (!r.ok) throw new Error('HTTP ' + r.status);\n"
    "    return r.json();\n"
    "  }).then(function (s) {\n"
    "    charts.forEach(function (c) {\n"
    "      var v = s[c.key];\n"
    "      if (typeof v !== 'number') return;\n"
    "      c.data.push(v);\n"
    "      if (c.data.length > KEEP) c.data.shift();\n"
    "      draw(c);\n"
    "    });\n"
    "    var a = s.allocator || {};\n"
    "    status.className = '';\n"
    "    status.textContent = 'pid ' + s.pid + ', up ' +\n"
    "      Math.round(s.uptime_seconds) + ' s, CPU ' +\n"
    "      s.cpu_seconds.toFixed(1) + ' s, allocator ' + a.name +\n"
    "      ', ' + s.http_responses.total + ' responses served';\n"
    "  }).catch(function (e) {\n"
    "    status.className = 'down';\n"
    "    status.textContent = 'no answer from the process (' + e.message +\n"
    "      '); retrying';\n"
    "  });\n"
    "}\n"
    "poll();\n"
    "setInterval(poll, 1000);\n"
    "})();\n"
    "</script>\n</body>\n</html>\n";

/* The page with the memory section (memory_chart.c) before </body>. */
void handle_charts(struct request *r)
{
    const char *end = strstr(charts_page, "</body>");
    size_t head = end ? (size_t)(end - charts_page) : sizeof charts_page - 1;
    struct pbuf b = {0};
    pbuf_append(&b, charts_page, head);
    pbuf_append(&b, memory_chart_section, memory_chart_section_len);
    pbuf_puts(&b, charts_page + head);
    if (b.oom)
        http_error(r, 500, "out of memory");
    else
        http_send(r, 200, "text/html; charset=utf-8", NULL, b.data, b.len);
    pbuf_free(&b);
}
