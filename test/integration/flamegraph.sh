# Flame graphs, /debug/stats and /debug/charts on a real process, read by
# curl, go tool pprof, xmllint and Debian's headless Chromium:
#  - the SVG is well-formed XML and names the host's functions, escaped;
#  - its totals are pprof's totals for the same profile and sample index;
#  - in a browser its script runs: the search highlights the right frames
#    and reports their share, zoom stretches one frame and hides the rest;
#  - /debug/stats agrees with /proc and with the heap profile; on jemalloc
#    it reports jemalloc's own figures;
#  - the charts page, in a browser, plots points with the process's values;
#  - errors answer as Go's do, and are counted by status.
. "$TOP/test/integration/lib.sh"

command -v chromium >/dev/null || fail "chromium is not installed (scripts/install-deps)"
command -v xmllint >/dev/null || fail "xmllint is not installed (scripts/install-deps)"
command -v python3 >/dev/null || fail "python3 is not installed"

MIB=1048576
HOST="$BUILD/test/programs/flame_host"
JEMALLOC=$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -n 1)
[ -n "$JEMALLOC" ] || fail "libjemalloc2 is not installed"

# The jemalloc run first, so that its heap grows while the rest runs.
start_agent jem env LD_PRELOAD="$AGENT:$JEMALLOC" "$HOST" 90
JEM_ADDR=$ADDR; JEM_PID=$PID
start_agent flame "$HOST" 90

# svg NAME QUERY: fetches a flame graph to $WORK/NAME.svg, checks the status,
# the content type and that it is well-formed XML.
svg() {
    ct=$(curl -sS --max-time 120 -o "$WORK/$1.svg" -w '%{http_code} %{content_type}' \
        "http://$ADDR/debug/pprof/flamegraph?$2")
    [ "$ct" = "200 image/svg+xml; charset=utf-8" ] || { cat "$WORK/$1.svg" >&2; fail "flamegraph?$2: $ct"; }
    xmllint --noout "$WORK/$1.svg" || fail "flamegraph?$2 is not well-formed XML"
}

# total_of FILE: the total written in a flame graph's subtitle.
total_of() {
    sed -n 's/.*id="subtitle"[^>]*>[^,]*, total \([^;<]*\)[;<].*/\1/p' "$1"
}

# share_of FILE NAME: the share (percent) of the first frame named NAME.
share_of() {
    grep -o "<title>$2 ([^)]*)</title>" "$1" | head -n 1 | sed 's/.*, \([0-9.]*\)%).*/\1/'
}

# spinner_ticks: the CPU ticks of the host's threads of PID, "SPINNER ALL"
# (the spinner's, and the spinner's, the grower's and main's together: the
# agent's own threads are not in a profile).
spinner_ticks() {
    for t in /proc/"$PID"/task/*; do
        printf '%s %s\n' "$(cat "$t/comm")" "$(sed 's/.*) //' "$t/stat" | awk '{ print $12 + $13 }')"
    done 2>/dev/null | awk '$1 == "spinner" { s += $2 } $1 ~ /^(spinner|grower|flame_host)$/ { a += $2 }
        END { print s + 0, a + 0 }'
}

# --- CPU: the spinner's functions, their share, escaping. -------------------
set -- $(spinner_ticks)
svg cpu "profile=profile&seconds=2"
set -- $(spinner_ticks) "$@"
grep -q '<title>flame_cpu_outer(long) ' "$WORK/cpu.svg" || fail "CPU flame graph lacks flame_cpu_outer"
grep -q '<title>int flame_cpu_leaf&lt;int&gt;(long) ' "$WORK/cpu.svg" \
    || fail "CPU flame graph lacks the escaped template name"
grep -q 'flame_cpu_leaf<int>' "$WORK/cpu.svg" && fail "a name is not escaped"
share=$(share_of "$WORK/cpu.svg" 'flame_cpu_outer(long)')
note "flame_cpu_outer: $share% of the CPU profile"
# One thread spins, one sleeps 200 ms between 1 MiB memsets: the spinner
# has most of the host's CPU time, by how much its clock says (over the
# request, a little longer than the profile: the ratio of the two threads
# holds over both). Within 15 points: the clock counts in 10 ms ticks, and
# a loaded machine gives the spinner as few as 20 of them in 2 s.
want=$(awk -v s1="$1" -v a1="$2" -v s0="$3" -v a0="$4" 'BEGIN { printf "%.1f", (a1 > a0 ? 100 * (s1 - s0) / (a1 - a0) : 0) }')
note "the spinner's own clock: $want% of the host threads' CPU meanwhile"
awk -v s="$share" -v w="$want" 'BEGIN { exit !(w > 0 && s >= w - 15 && s <= w + 15) }' ||
    fail "flame_cpu_outer has $share% of CPU in the flame graph, its thread's clock $want%"
grep -q 'cpu, total [0-9.]*m\{0,1\}s; over the last 2 s' "$WORK/cpu.svg" \
    || fail "CPU subtitle: $(grep -o 'id="subtitle"[^<]*' "$WORK/cpu.svg")"

# --- threadcreate: exact counts. ---------------------------------------------
svg tc "profile=threadcreate"
grep -q '<title>all (2 threadcreate, 100.00%)</title>' "$WORK/tc.svg" \
    || { grep -o '<title>[^<]*' "$WORK/tc.svg" >&2; fail "threadcreate flame graph does not count 2 threads"; }
grep -q '<title>main (2 threadcreate, 100.00%)</title>' "$WORK/tc.svg" || fail "threadcreate: main did not create both"

# --- heap: once the grower is done, totals equal pprof's. --------------------
for i in $(seq 200); do grep -q grown "$WORK/flame.out" && grep -q grown "$WORK/jem.out" && break; sleep 0.1; done
grep -q grown "$WORK/flame.out" || { stacks "$PID"; fail "flame_host did not finish growing"; }
grep -q grown "$WORK/jem.out" || { stacks "$JEM_PID"; fail "flame_host on jemalloc did not finish growing"; }

svg heap "profile=heap"
heap_total=$(total_of "$WORK/heap.svg")
top=$(pprof -top "http://$ADDR/debug/pprof/heap")
pprof_total=$(printf '%s\n' "$top" | sed -n 's/.* of \([0-9.]*[kMG]*B\) total.*/\1/p')
note "heap: flame graph total $heap_total, pprof total $pprof_total"
[ -n "$heap_total" ] && [ "$heap_total" = "$pprof_total" ] || fail "heap totals differ: '$heap_total' vs pprof '$pprof_total'"
# 48 blocks of 1 MiB, sampled at 512 KiB: the estimate is within 25%.
awk -v t="$heap_total" 'BEGIN { v = t + 0; exit !(v >= 36 && v <= 60 && t ~ /MB$/) }' \
    || fail "heap total $heap_total is not about 48MB"
share=$(share_of "$WORK/heap.svg" 'flame_heap_grow(unsigned long)')
awk -v s="$share" 'BEGIN { exit !(s >= 95) }' || fail "flame_heap_grow has $share% of the heap"

svg objs "profile=heap&sample_index=inuse_objects"
objs_total=$(total_of "$WORK/objs.svg")
pobjs=$(pprof -top -sample_index=inuse_objects "http://$ADDR/debug/pprof/heap" \
    | sed -n 's/.* of \([0-9]*\) total.*/\1/p')
[ "$objs_total" = "$pobjs inuse_objects" ] || fail "inuse_objects: '$objs_total' vs pprof '$pobjs'"

svg allocs "profile=allocs"
grep -q 'id="subtitle"[^>]*>alloc_space, total' "$WORK/allocs.svg" || fail "allocs does not default to alloc_space"

# --- errors, as Go's. ---------------------------------------------------------
[ "$(http_status 'debug/pprof/flamegraph?profile=nosuch')" = 404 ] || fail "unknown profile is not 404"
[ "$(http_status 'debug/pprof/flamegraph')" = 400 ] || fail "missing profile is not 400"
[ "$(http_status 'debug/pprof/flamegraph?profile=cmdline')" = 400 ] || fail "cmdline is not 400"
[ "$(http_status 'debug/pprof/flamegraph?profile=heap&seconds=x')" = 400 ] || fail "bad seconds is not 400"
body=$(fetch 'debug/pprof/flamegraph?profile=heap&sample_index=bogus')
[ "$body" = "sample_index bogus is not one of: alloc_objects, alloc_space, inuse_objects, inuse_space" ] \
    || fail "bad sample_index: '$body'"
headers=$(curl -s -D - -o /dev/null "http://$ADDR/debug/pprof/flamegraph?profile=heap&sample_index=bogus")
expect_contains "$headers" "X-Go-Pprof: 1"

# --- in a browser: the script runs, search highlights. ------------------------
browser --dump-dom "http://$ADDR/debug/pprof/flamegraph?profile=heap&search=flame_heap_g" > "$WORK/heap.dom"
frames=$(grep -c '<g class="f' "$WORK/heap.svg")
grep -q "data-ready=\"$frames\"" "$WORK/heap.dom" || fail "the flame graph's script did not run over its $frames frames"
grep -q 'flame_heap_grow(unsigned long)' "$WORK/heap.dom" || fail "browser DOM lacks flame_heap_grow"
[ "$(grep -c 'class="f m"' "$WORK/heap.dom")" = 1 ] || fail "search did not highlight exactly flame_heap_grow"
matched=$(sed -n 's/.*>Matched: \([0-9.]*\)%<.*/\1/p' "$WORK/heap.dom")
note "search flame_heap_g: matched $matched% in the browser, $share% in the SVG"
[ "$matched" = "$(awk -v s="$share" 'BEGIN { printf "%.1f", s }')" ] || fail "browser matched '$matched%', frame has $share%"

browser --dump-dom "http://$ADDR/debug/pprof/flamegraph?profile=profile&seconds=1" > "$WORK/cpu.dom"
grep -q 'flame_cpu_outer(long)' "$WORK/cpu.dom" || fail "browser DOM lacks flame_cpu_outer"
grep -q 'flame_cpu_leaf&lt;int&gt;' "$WORK/cpu.dom" || fail "browser DOM lacks flame_cpu_leaf<int>"

# Zoom (as a click does, here from the URL): the goroutine profile has the
# spinner beside the other threads; zoomed on it, it spans the whole width
# and the frames beside it are hidden.
# The picture takes the window's width (1400 px here, 1200 without a
# script), zoomed or not.
browser --window-size=1400,900 --dump-dom "http://$ADDR/debug/pprof/flamegraph?profile=goroutine&zoom=spinner" > "$WORK/zoom.dom"
grep -q 'data-zoomed="spinner(void\*)"' "$WORK/zoom.dom" || fail "zoom=spinner did not zoom"
grep -q '<svg [^>]*width="1400"' "$WORK/zoom.dom" || fail "the flame graph does not take the window's 1400 px"
grep -q '<title>spinner(void\*) ([^)]*)</title><rect x="10.00" y="[0-9]*" width="1380.00"' "$WORK/zoom.dom" \
    || fail "the zoomed frame does not span the window's width"
grep -q '<title>all ([^)]*)</title><rect x="10.00" y="[0-9]*" width="1380.00"' "$WORK/zoom.dom" \
    || fail "the root frame does not span the window's width"
browser --window-size=700,900 --dump-dom "http://$ADDR/debug/pprof/flamegraph?profile=goroutine" > "$WORK/narrow.dom"
grep -q '<title>all ([^)]*)</title><rect x="10.00" y="[0-9]*" width="680.00"' "$WORK/narrow.dom" \
    || fail "the root frame does not span a 700 px window"
grep -q '<g class="f" data-i="[0-9]*" style="display: none;">' "$WORK/zoom.dom" \
    || fail "zoom hid no frame beside the spinner"

# --- /debug/stats against /proc and the heap profile. -------------------------
fetch debug/stats > "$WORK/stats.json"
tasks=$(ls "/proc/$PID/task" | wc -l)
rss_kb=$(awk '/^VmRSS/ {print $2}' "/proc/$PID/status")
pprof_bytes=$(pprof -sample_index=inuse_space -unit=B -top "http://$ADDR/debug/pprof/heap" \
    | sed -n 's/.* of \([0-9]*\)B total.*/\1/p')
python3 - "$WORK/stats.json" "$PID" "$tasks" "$rss_kb" "$pprof_bytes" <<'EOF' || fail "stats: $(cat "$WORK/stats.json")"
import json, sys
s = json.load(open(sys.argv[1]))
pid, tasks, rss_kb, heap = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def check(cond, what):
    if not cond:
        sys.exit("stats: " + what)
check(s["pid"] == pid, "pid %d != %d" % (s["pid"], pid))
check(abs(s["threads"] - tasks) <= 1, "threads %d, /proc has %d" % (s["threads"], tasks))
check(abs(s["rss_bytes"] - rss_kb * 1024) < 0.1 * rss_kb * 1024, "rss %d vs VmRSS %d kB" % (s["rss_bytes"], rss_kb))
check(s["rss_bytes"] > 48 << 20, "rss below the 48 MiB the host touched")
check(5 < s["uptime_seconds"] < 120, "uptime %f" % s["uptime_seconds"])
check(0 < s["cpu_seconds"] <= s["uptime_seconds"] * s["cpus"], "cpu_seconds %f" % s["cpu_seconds"])
check(0 <= s["cpu_percent"] <= 100 * s["cpus"], "cpu_percent %f" % s["cpu_percent"])
check(abs(s["heap_inuse_bytes"] - heap) <= 0.01 * heap, "heap %d vs pprof %d" % (s["heap_inuse_bytes"], heap))
a = s["allocator"]
check(a["name"] == "glibc", "allocator %s" % a["name"])
check(a["inuse_bytes"] >= 48 << 20, "glibc in use %d < 48 MiB" % a["inuse_bytes"])
h = s["http_responses"]
check(h["by_code"]["404"] >= 1 and h["by_code"]["400"] >= 4, "by_code %s" % h["by_code"])
check(h["by_code"]["200"] >= 8 and h["total"] >= sum(h["by_code"].values()), "totals %s" % h)
print("stats ok: rss %d MiB, heap %d MiB, glibc in use %d MiB, %d threads" %
      (s["rss_bytes"] >> 20, s["heap_inuse_bytes"] >> 20, a["inuse_bytes"] >> 20, s["threads"]))
EOF

# jemalloc's own figures when the host runs on it.
curl -sS "http://$JEM_ADDR/debug/stats" > "$WORK/jem.json"
python3 - "$WORK/jem.json" <<'EOF' || fail "jemalloc stats: $(cat "$WORK/jem.json")"
import json, sys
a = json.load(open(sys.argv[1]))["allocator"]
if a["name"] != "jemalloc":
    sys.exit("allocator is %s, not jemalloc" % a["name"])
if not (48 << 20 <= a["allocated_bytes"] <= a["active_bytes"] <= a["resident_bytes"] + (16 << 20)):
    sys.exit("jemalloc figures out of order: %s" % a)
print("jemalloc ok: allocated %d MiB, active %d MiB, resident %d MiB" %
      (a["allocated_bytes"] >> 20, a["active_bytes"] >> 20, a["resident_bytes"] >> 20))
EOF

# --- the charts page in a browser: points with the process's values. ---------
browser --virtual-time-budget=5000 --dump-dom "http://$ADDR/debug/charts" > "$WORK/charts.dom"
python3 - "$WORK/charts.dom" <<'EOF' || fail "charts page"
import re, sys
dom = open(sys.argv[1]).read()
def check(cond, what):
    if not cond:
        sys.exit("charts: " + what)
now = {}
for c in ("heap", "rss", "cpu", "threads"):
    m = re.search(r'id="chart-%s".*?<svg[^>]*data-points="(\d+)"[^>]*>'
                  r'<polyline[^>]*points="([^"]*)"' % c, dom, re.S)
    check(m, "no chart %s with points" % c)
    n, pts = int(m.group(1)), m.group(2).split()
    check(n >= 3 and len(pts) == n, "chart %s: %d points, line has %d" % (c, n, len(pts)))
    ys = [float(p.split(",")[1]) for p in pts]
    check(all(0 <= y <= 160 for y in ys), "chart %s: points outside the chart" % c)
    now[c] = re.search(r'id="chart-%s".*?class="now">([^<]*)<' % c, dom, re.S).group(1)
print("charts ok:", now)
heap = float(now["heap"].split()[0])
check(now["heap"].endswith(" MiB") and 36 <= heap <= 60, "heap shows %s, not about 46 MiB" % now["heap"])
check(now["rss"].endswith(" MiB") and float(now["rss"].split()[0]) >= 46, "rss shows %s" % now["rss"])
check(int(now["threads"]) >= 3, "threads shows %s" % now["threads"])
check("allocator glibc" in dom, "status line lacks the allocator")
# The y-axis runs from 0 to a round value above the data (a dip is drawn
# as the share it is, not as a cliff); the x-axis is labelled in time.
def labels(c):
    block = re.search(r'id="chart-%s".*?</svg>' % c, dom, re.S).group(0)
    return re.findall(r'<text class="axis( time)?"[^>]*>([^<]*)</text>', block)
for c in ("heap", "rss"):
    ax = labels(c)
    ys = [t for k, t in ax if not k]
    ts = [t for k, t in ax if k]
    check(len(ys) == 2 and len(ts) == 2, "chart %s labels %s" % (c, ax))
    unit = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    lo = float(ys[1].split()[0]) * unit[ys[1].split()[1]]
    hi = float(ys[0].split()[0]) * unit[ys[0].split()[1]]
    val = float(now[c].split()[0]) * unit[now[c].split()[1]]
    check(lo == 0 and hi >= val, "chart %s: y-axis %s to %s for %s" % (c, ys[1], ys[0], now[c]))
    check(re.fullmatch(r"\d+ s ago", ts[0]) and ts[1] == "now", "chart %s time axis %s" % (c, ts))
print("axes ok: heap %s, rss %s" % (labels("heap"), labels("rss")))
EOF

# --- the index links to all of it. --------------------------------------------
index=$(fetch debug/pprof/)
for p in profile heap allocs block mutex threadcreate; do
    expect_contains "$index" "<a href='flamegraph?profile=$p'>" "index"
done
expect_contains "$index" "<a href='../stats'>"
expect_contains "$index" "<a href='../charts'>"
note "ok"
