# pprof-attach with PPROF_PUSH (docs/attach.md): the push starts after an
# attach as it does preloaded, from the attach command's environment, and
# the detach ends it.
#
# 1. cpu_burn, started without the agent, attached with its push pointed
#    at the tests' OpenTelemetry Collector (test/collector): the pushed CPU
#    splits between hot_a and hot_b as the program measured itself over the
#    window from before the attach to after the detach (its CPU clocks), and
#    is no more than it used then; the resource is the attach command's
#    (OTEL_SERVICE_NAME). The detach sends the last window, joins the
#    push's threads: after it no request arrives, no thread of the agent is
#    left.
# 2. Attached again with another service name: its requests carry it, and
#    the process's service.instance.id is the one of the first attach.
# 3. Attached with no Collector at the endpoint: one line says so, however
#    often the push tries; the detach ends it as well; the program runs on.
# 4. Attached without PPROF_PUSH: no push (the settings are this attach's,
#    not the last one's).
. "$TOP/test/integration/lib.sh"

ATTACH="$BUILD/pprof-attach"
[ -x "$ATTACH" ] || fail "no $ATTACH (make test-bins builds it)"
collector_prepare
CPORT=$(free_port)
GOT="$WORK/received.jsonl"
collector_config "$CPORT" "$GOT"
start_collector

"$BUILD/test/programs/cpu_burn" 2 600 >"$WORK/burn.out" 2>"$WORK/burn.err" &
PID=$!
PIDS="$PIDS $PID"
wait_until "cpu_burn to start" grep -q '^started' "$WORK/burn.out"

# attach_push SERVICE ENDPOINT: attaches to PID, pushing every second to
# ENDPOINT as SERVICE; sets ADDR.
attach_push() {
    PPROF_ADDR=127.0.0.1:0 PPROF_PUSH=otlp PPROF_PUSH_INTERVAL=1 OTEL_SERVICE_NAME=$1 \
        OTEL_EXPORTER_OTLP_ENDPOINT=$2 "$ATTACH" "$PID" 2>"$WORK/attach.err" ||
        { cat "$WORK/attach.err" >&2; fail "pprof-attach $PID failed"; }
    ADDR=$(sed -n 's|^pprofagent: serving http://\([^/]*\)/debug/pprof/ (pid [0-9]*)$|\1|p' "$WORK/attach.err")
    [ -n "$ADDR" ] || fail "pprof-attach printed no serving line"
}
detach() {
    "$ATTACH" --detach "$PID" 2>"$WORK/detach.err" ||
        { cat "$WORK/detach.err" >&2; fail "pprof-attach --detach failed"; }
    left=$(cat /proc/"$PID"/task/*/comm | grep '^civetweb-\|^pprof' || true)
    [ -z "$left" ] || fail "threads of the agent left after the detach: $left"
}
# pushed_samples: "A B", the CPU samples of hot_a and hot_b pushed for PID.
pushed_samples() {
    $READ "$GOT" "$PID" | awk '$1 == "function" && $3 == "samples" && $4 == "hot_a" {a += $5}
        $1 == "function" && $3 == "samples" && $4 == "hot_b" {b += $5} END {print a + 0, b + 0}'
}

# --- 1. pushed after the attach, checked against the program's clocks ---
set -- $(host_figures burn a)
a0=$1 b0=$2
attach_push attached-1 "http://127.0.0.1:$CPORT"
wait_requests "$PID" 1 60
note "first request of pid $PID after the attach"
# At least 200 samples pushed (a loaded machine gives the burners little).
end=$(($(date +%s) + 120))
while :; do
    set -- $(pushed_samples)
    [ $(($1 + $2)) -ge 200 ] && [ "$2" -gt 0 ] && break
    [ "$(date +%s)" -le "$end" ] || fail "fewer than 200 CPU samples pushed in 2 minutes ($1 + $2)"
    sleep 1
done
detach
n=$(requests "$PID")
set -- $(host_figures burn a)
a1=$1 b1=$2
set -- $(pushed_samples)
na=$1 nb=$2
cpu=$($READ "$GOT" "$PID" | awk '$1 == "function" && $3 == "cpu" && $4 == "burner" {s += $5} END {print s + 0}')
note "hot_a / hot_b: the program measured $((a1 - a0)) / $((b1 - b0)) ns from before the attach to after the detach, pushed $na / $nb samples; $cpu ns under burner in $n requests"
awk -v a=$((a1 - a0)) -v b=$((b1 - b0)) -v na="$na" -v nb="$nb" 'BEGIN {
    d = (na / nb) / (a / b) - 1; if (d < 0) d = -d
    exit !(d < 3 * sqrt(1 / na + 1 / nb) + 0.03)}' ||
    fail "the pushed CPU is not split as the program measured"
awk -v c="$cpu" -v t=$((a1 + b1 - a0 - b0)) 'BEGIN { exit !(c > 0 && c <= t * 1.05 + 2e7) }' ||
    fail "$cpu ns of the burners' CPU pushed, more than the $((a1 + b1 - a0 - b0)) ns they used"
res=$($READ "$GOT" "$PID" | awk '$1 == "request" && $2 == 1')
expect_contains "$res" "resource service.name=attached-1" "the pushed resource"
expect_contains "$res" "resource process.pid=$PID" "the pushed resource"
# Nothing after the detach: three intervals' time, no request more.
sleep 3
[ "$(requests "$PID")" = "$n" ] || fail "$(( $(requests "$PID") - n )) requests arrived after the detach"

# --- 2. attached again, with another environment ---
attach_push attached-2 "http://127.0.0.1:$CPORT"
wait_requests "$PID" $((n + 1)) 60
detach
last=$(awk -v p="\"intValue\":\"$PID\"" 'index(substr($0, 1, 2000), p)' "$GOT" | tail -n 1 |
    $READ /dev/stdin "$PID")
expect_contains "$last" "resource service.name=attached-2" "the second attach's request"
ids=$($READ "$GOT" "$PID" | awk '$3 == "resource" && $4 ~ /^service.instance.id=/ {print $4}' | sort -u | wc -l)
[ "$ids" = 1 ] || fail "the process pushed as $ids instances over two attaches"
note "second attach: $(( $(requests "$PID") - n )) requests as attached-2"

# --- 3. no Collector: one line, and nothing else changes ---
dead=$(free_port)
attach_push attached-3 "http://127.0.0.1:$dead"
# tries: the push's tries so far (/debug/stats).
tries() {
    fetch debug/stats | sed -n 's/.*"push": {.*"attempts": \([0-9]*\).*/\1/p'
}
tries_at_least() { [ "$(tries)" -ge "$1" ]; }
wait_until "two tries to a missing Collector" tries_at_least 2
detach
grep "push:" "$WORK/burn.err" | sed 's/^/# /'
[ "$(grep -c "push: http://127.0.0.1:$dead" "$WORK/burn.err")" = 1 ] ||
    fail "not one line about the missing Collector"
[ "$(grep -c 'push:' "$WORK/burn.err")" = 1 ] || fail "more than one line about the push"
n=$(grep -c '^a=' "$WORK/burn.out")
host_figures burn a >/dev/null
[ "$(grep -c '^a=' "$WORK/burn.out")" -gt "$n" ] || fail "the program does not answer after the detach"
kill -0 "$PID" || fail "cpu_burn ended"

# --- 4. attached without PPROF_PUSH: no push, whatever the last attach had ---
PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>"$WORK/attach4.err" ||
    { cat "$WORK/attach4.err" >&2; fail "the attach without PPROF_PUSH failed"; }
pushers=$(cat /proc/"$PID"/task/*/comm | grep '^pprofagent-' || true)
[ -z "$pushers" ] || fail "push threads after an attach without PPROF_PUSH: $pushers"
detach
echo PASS
