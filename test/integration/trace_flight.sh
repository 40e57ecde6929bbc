# The flight recorder (PPROF_TRACE_FLIGHT=1): test/programs/trace_truth
# runs with it on. /debug/pprof/trace?flight=1 answers at once with the
# last seconds only (older records are gone once the program has run
# longer), in a trace go tool trace reads with no warning and whose
# blocking profiles match the program's own measures over its window
# (within 10%); a timed trace is the recorder's last N seconds; a dump
# (PPROF_DUMP_SIGNAL) writes the recorder's trace beside the profiles.
. "$TOP/test/integration/lib.sh"

# The trace is in Go 1.26's format.
need_go 26

mkdir -p "$WORK/dumps"
PPROF_TRACE_FLIGHT=1 PPROF_TRACE_MB=32 PPROF_DUMP_DIR="$WORK/dumps" PPROF_DUMP_SIGNAL=USR2 \
    start_agent flight "$BUILD/test/programs/trace_truth"
for i in $(seq 200); do grep -q '^ready' "$WORK/flight.out" && break; sleep 0.05; done
grep -q '^ready' "$WORK/flight.out" || fail "the program did not start its threads"

# window FILE: "first last" times of a trace (CLOCK_MONOTONIC ns).
window() {
    "$GO" tool trace -d=parsed "$1" >"$WORK/parsed" 2>"$WORK/parsed.err" ||
        { cat "$WORK/parsed.err"; fail "go tool trace cannot read $1"; }
    [ ! -s "$WORK/parsed.err" ] || { cat "$WORK/parsed.err"; fail "go tool trace warns about $1"; }
    sed -n 's/.* Sync Time=\([0-9]*\) .*/\1/p' "$WORK/parsed" | sed -n '1p;$p' | tr '\n' ' '
}

# Wait until the recorder has let go of the program's first second: the
# kept window then starts after the program's first measured wait.
kill -USR1 "$PID"
for i in $(seq 100); do grep -q '^done' "$WORK/flight.out" && break; sleep 0.05; done
first=$(awk '$1 == "wait" { print $3 }' "$WORK/flight.out" | sort -n | head -n 1)
[ -n "$first" ] || fail "the program measured no wait"
for i in $(seq 300); do
    code=$(curl -sS --max-time 60 -o "$WORK/trace" -w '%{http_code}' "http://$ADDR/debug/pprof/trace?flight=1")
    [ "$code" = 200 ] || fail "flight=1 answered $code"
    set -- $(window "$WORK/trace")
    w0=$1; w1=$2
    [ "$w0" -gt $((first + 1000000000)) ] && [ $((w1 - w0)) -gt 900000000 ] && break
    sleep 0.2
done
[ "$w0" -gt $((first + 1000000000)) ] || fail "the recorder still keeps the program's first second"
note "flight window $(( (w1 - w0) / 1000000 )) ms, starting $(( (w0 - first) / 1000000 )) ms after the program's first wait"

kill -USR1 "$PID"
n=$(grep -c '^done' "$WORK/flight.out")
for i in $(seq 100); do [ "$(grep -c '^done' "$WORK/flight.out")" -gt 1 ] && break; sleep 0.05; done
measured() {
    awk -v k="$1" -v a="$w0" -v b="$w1" '/^done/ { d++ } d == 1 && $1 == "wait" && $2 == k && $3 >= a && $4 <= b { s += $4 - $3 }
        END { printf "%.2f", s / 1e6 }' "$WORK/flight.out"
}
for case in sync:lock:lock_waiter syscall:pipe:pipe_reader net:sock:sock_reader; do
    kind=${case%%:*}; rest=${case#*:}; what=${rest%%:*}; fn=${rest#*:}
    top=$(trace_top "$kind") || exit 1
    m=$(measured "$what")
    awk -v m="$m" 'BEGIN { exit !(m > 100) }' || fail "$what waits: only $m ms measured in the window"
    within 10 "$(flat_ms "$top" "$fn")" "$m" "flight -pprof=$kind on $fn"
done

# A timed trace in flight mode: the recorder's last N seconds.
code=$(curl -sS --max-time 60 -o "$WORK/timed" -w '%{http_code}' "http://$ADDR/debug/pprof/trace?seconds=0.5")
[ "$code" = 200 ] || fail "a timed trace in flight mode answered $code"
window "$WORK/timed" >/dev/null

# A dump writes the recorder's trace beside the profiles.
kill -USR2 "$PID"
for i in $(seq 200); do ls "$WORK/dumps"/*.trace >/dev/null 2>&1 && break; sleep 0.05; done
f=$(ls "$WORK/dumps"/*.trace 2>/dev/null | head -n 1)
[ -n "$f" ] || { ls -la "$WORK/dumps"; fail "no .trace file after the dump signal"; }
window "$f" >/dev/null
note "dump: $(basename "$f")"
echo ok
