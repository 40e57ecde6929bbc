# The pages people read, in headless Chromium (what a browser lays out and
# its scripts draw, from the DOM after they ran), beside a Python program
# whose heap holds 20 MB in 20,000 blocks:
# - the index: no profile's label runs into its description (each label's
#   box is as wide as its text);
# - /debug/charts: sizes in IEC units (KiB, MiB, GiB, never kB or MB), each
#   chart's axis from 0 to a higher value (two labels that differ, also
#   for the flat threads chart);
# - /debug/memory: a page for a browser (its parts in a bar and a table,
#   the heap's top sites read by its script, the biggest being the
#   program's 20,000 blocks), and JSON for curl (no Accept: text/html) and
#   for ?format=json.
. "$TOP/test/integration/lib.sh"
command -v chromium >/dev/null || fail "chromium is not installed (scripts/install-deps)"

export PPROF_HEAP_RATE=4096
start_agent py /usr/bin/python3 -c 'import time
x = [bytearray(1000) for i in range(20000)]
print("ready", flush=True)
time.sleep(120)'
for i in $(seq 100); do grep -q ready "$WORK/py.out" && break; sleep 0.1; done

# The index: a script measures each label's box against its text.
fetch debug/pprof/ > "$WORK/index.html"
cat >> "$WORK/index.html" <<'HTML'
<script>
var bad = [];
document.querySelectorAll('.profile-name').forEach(function (e) {
  if (e.scrollWidth > e.clientWidth) bad.push(e.textContent);
});
document.title = 'labels:' + (bad.length ? 'overflow ' + bad.join(',') : 'ok');
</script>
HTML
dom=$(browser --dump-dom "file://$WORK/index.html")
title=$(printf '%s\n' "$dom" | sed -n 's:.*<title>\(labels[^<]*\)</title>.*:\1:p')
note "index: $title"
[ "$title" = "labels:ok" ] || fail "index: a label runs into its description ($title)"

# The charts, after a few polls.
dom=$(browser --virtual-time-budget=5000 --dump-dom "http://$ADDR/debug/charts")
for c in heap rss cpu threads; do
    chart=$(printf '%s\n' "$dom" | tr '\n' ' ' | grep -o "<div class=\"chart\" id=\"chart-$c\">.*" |
        sed 's:<div class="chart" id="chart-[a-z]*" :&:2' | sed 's:</svg>.*::')
    labels=$(printf '%s\n' "$chart" | grep -o '<text class="axis" [^>]*>[^<]*</text>' | sed 's/<[^>]*>//g')
    now=$(printf '%s\n' "$chart" | grep -o 'class="now">[^<]*' | sed 's/.*>//')
    top=$(printf '%s\n' "$labels" | sed -n 1p) bottom=$(printf '%s\n' "$labels" | sed -n 2p)
    note "chart $c: now $now, axis from $bottom to $top"
    [ -n "$top" ] && [ -n "$now" ] || fail "chart $c was not drawn"
    [ "$top" != "$bottom" ] || fail "chart $c: both axis labels read $top"
    case "$bottom" in 0|"0 B"|0.0%) ;; *) fail "chart $c: the axis starts at $bottom, not 0" ;; esac
    case "$top $now" in *kB*|*MB*|*GB*) fail "chart $c: decimal units ($top, $now)" ;; esac
done
rss=$(printf '%s\n' "$dom" | grep -o 'id="memory-rss">[^<]*' | sed 's/.*>//')
note "charts page: $rss"
case "$rss" in "RSS "*MiB) ;; *) fail "charts page: RSS reads '$rss'" ;; esac

# /debug/memory: JSON for curl and ?format=json, a page for a browser.
json=$(fetch debug/memory)
printf '%s' "$json" | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d["rss"] > 0 and d["parts"]' ||
    fail "/debug/memory without Accept: text/html is not JSON"
printf '%s' "$(fetch 'debug/memory?format=json' -H 'Accept: text/html')" |
    python3 -c 'import json, sys; json.load(sys.stdin)' || fail "/debug/memory?format=json is not JSON"
ct=$(curl -s -o /dev/null -w '%{content_type}' -H 'Accept: text/html,*/*' "http://$ADDR/debug/memory")
[ "$ct" = "text/html; charset=utf-8" ] || fail "/debug/memory for a browser: $ct"
dom=$(browser --virtual-time-budget=5000 --dump-dom "http://$ADDR/debug/memory")
parts=$(printf '%s\n' "$dom" | grep -o '<tr data-part="[a-z_]*">' | wc -l)
[ "$parts" -eq 7 ] || fail "/debug/memory page: $parts parts in its table, want 7"
inuse=$(printf '%s\n' "$dom" | tr '\n' ' ' | grep -o '<tr data-part="malloc_inuse">.*' |
    sed 's:</tr>.*::' | grep -o '[0-9.]* MiB' | head -n 1)
note "/debug/memory page: malloc in use $inuse"
first=$(printf '%s\n' "$dom" | grep -o '<tr class="site">.*' | sed 's:</tr>.*::' | sed 's/<[^>]*>/|/g')
note "/debug/memory page: top site $first"
# The program's 20,000 blocks of 1000 bytes (20 MB, the heap profile's
# estimate) are the biggest site, allocated for bytearrays.
expect_contains "$first" "ByteArray" "the top allocation site"
mib=$(printf '%s\n' "$first" | awk -F'|' '{for (i = 1; i <= NF; i++) if ($i ~ / MiB$/) {sub(/ MiB/, "", $i); print $i; exit}}')
awk -v m="${mib:-0}" 'BEGIN { exit !(m >= 15 && m <= 25) }' ||
    fail "the top site holds ${mib:-?} MiB, not about 19 (20,000 x 1000 bytes)"
