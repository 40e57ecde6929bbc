# The agent as a scrape target for Grafana Alloy (pyroscope.scrape) and
# Parca: their scrape sequences are replayed against a real service under
# the agent (default profiles, their User-Agent, their seconds= for the CPU
# profile, with a 3 s interval instead of 15 s / 10 s), and every rule they
# depend on is checked (shared pprof-format notes, section 5): status exactly
# 200, Content-Type application/octet-stream, gzip magic, Go's sample-type
# strings, sequential ids, nonzero location ids and label keys, time_nanos
# once, duration_nanos set on the CPU profile and unset on cumulative ones,
# cumulative totals that only grow across scrapes, and the same location
# addresses for the same stacks from one scrape to the next.
. "$TOP/test/integration/lib.sh"
check="python3 $TOP/test/scrape_check.py"

# It lives until the test stops it, at most past the runner's limit (400 s):
# 120 s ran out mid-test beside another test at load 25.
start_agent service env PPROF_HEAP_RATE=65536 PPROF_MUTEX_FRACTION=1 \
    PPROF_BLOCK_RATE=1 "$BUILD/test/programs/demo_service" 600
sleep 1

# scrape NAME UA PATH OUT: one GET as the scraper sends it; checks status
# and headers exactly as Alloy and Parca do.
scrape() {
    code=$(curl -sS --max-time 30 -A "$2" -D "$4.hdr" -o "$4" \
        -w '%{http_code}' "http://$ADDR/debug/pprof/$3")
    [ "$code" = 200 ] || { cat "$4"; fail "$1 /debug/pprof/$3: status $code, Parca needs exactly 200"; }
    ct=$(grep -i "^content-type:" "$4.hdr" | tr -d '\r' | cut -d' ' -f2-)
    [ "$ct" = application/octet-stream ] || fail "$1 $3: Content-Type '$ct'"
    [ -s "$4" ] || fail "$1 $3: empty body"
    magic=$(od -An -tx1 -N2 "$4" | tr -d ' ')
    [ "$magic" = 1f8b ] || fail "$1 $3: body starts with $magic, not gzip"
}

MEM="alloc_objects/count,alloc_space/bytes,inuse_objects/count,inuse_space/bytes"
CONT="contentions/count,delay/nanoseconds"
CPU="samples/count,cpu/nanoseconds"

goroutine=0
if [ "$(http_status goroutine)" = 200 ]; then goroutine=1; fi

# replay TOOL UA SECONDS: one round of a scraper's default profiles, each
# scraped as that tool does (all at once; the CPU profile with seconds=N).
replay() {
    tool=$1; ua=$2; secs=$3; round=$4
    d="$WORK/$tool.$round"
    scrape "$tool" "$ua" "profile?seconds=$secs" "$d.cpu" &
    cpu_pid=$!
    scrape "$tool" "$ua" allocs "$d.memory"
    scrape "$tool" "$ua" block "$d.block"
    scrape "$tool" "$ua" mutex "$d.mutex"
    if [ $goroutine = 1 ]; then
        scrape "$tool" "$ua" goroutine "$d.goroutine"
    fi
    wait $cpu_pid || fail "$tool: CPU scrape failed"
    $check check "$d.memory" "$MEM" cumulative "$d.memory.json" || fail "$tool memory rules"
    $check check "$d.block" "$CONT" cumulative "$d.block.json" || fail "$tool block rules"
    $check check "$d.mutex" "$CONT" cumulative "$d.mutex.json" || fail "$tool mutex rules"
    $check check "$d.cpu" "$CPU" delta "$d.cpu.json" || fail "$tool process_cpu rules"
    if [ $goroutine = 1 ]; then
        $check check "$d.goroutine" "goroutine/count" cumulative "$d.goroutine.json" \
            || fail "$tool goroutine rules"
    fi
}

# Alloy: scrape_interval 3s -> delta_profiling_duration = interval - 1 = 2 s.
# Its client-side delta needs cumulative, growing totals with stable
# addresses for memory (alloc_*), block and mutex (contentions, delay).
for round in 1 2 3; do
    replay alloy "Alloy/v1.4.0 (linux)" 2 $round
done
for pair in "1 2" "2 3"; do
    set -- $pair
    $check grows "$WORK/alloy.$1.memory.json" "$WORK/alloy.$2.memory.json" \
        alloc_objects/count alloc_space/bytes || fail "alloy memory: not cumulative/stable"
    $check grows "$WORK/alloy.$1.block.json" "$WORK/alloy.$2.block.json" \
        contentions/count delay/nanoseconds || fail "alloy block: not cumulative/stable"
    $check grows "$WORK/alloy.$1.mutex.json" "$WORK/alloy.$2.mutex.json" \
        contentions/count delay/nanoseconds || fail "alloy mutex: not cumulative/stable"
done
# Alloy differences the second and third scrape against the one before: the
# difference must not be empty, or nothing would reach Pyroscope.
python3 - "$WORK/alloy.1.memory.json" "$WORK/alloy.3.memory.json" <<'PY' || fail "allocs did not grow between scrapes"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert b["totals"][1] > a["totals"][1], (a["totals"], b["totals"])
PY

# The CPU profile covers the asked duration and names the service's code.
python3 - "$WORK/alloy.3.cpu.json" <<'PY' || fail "CPU profile of the Alloy scrape"
import json, sys
s = json.load(open(sys.argv[1]))
d = s["duration_nanos"] / 1e9
assert 1.9 <= d <= 5, "duration %.2f s for seconds=2" % d
names = " ".join(s["stacks"])
assert "parse_request" in names, "parse_request missing"
PY

# Parca: scrape_interval 3s -> process_cpu seconds = 3; status must be 200.
for round in 1 2; do
    replay parca "conprof/v0.22.0" 3 $round
done
$check grows "$WORK/parca.1.memory.json" "$WORK/parca.2.memory.json" \
    alloc_objects/count alloc_space/bytes || fail "parca memory: not cumulative"
# Alloy's and Parca's scrapes of the same process agree on addresses.
$check grows "$WORK/alloy.3.mutex.json" "$WORK/parca.2.mutex.json" \
    contentions/count delay/nanoseconds || fail "mutex addresses changed between scrapers"
[ $goroutine = 1 ] || note "goroutine is not served by this build: not checked"
stop "$PID"
echo ok
