# Execution trace truth: test/programs/trace_truth has a known timeline and
# measures every wait around its own call. Over the trace's window, `go
# tool trace -pprof=sync` puts the mutex waits on lock_waiter, =syscall
# the pipe reads on pipe_reader and =net the socket receives on
# sock_reader, each within 10% of what the program measured over the same
# window; sleeps land in none of the three. Every thread is a goroutine
# named by its thread name; the mutex waiter is unblocked from the
# holder's thread; the CPU burner has CPU samples in burn_cpu; every view
# of `go tool trace` answers, with no warning. Then Go's parameter
# handling: seconds=0 and seconds=x trace 1 s, a second trace at once gets
# 500, past the limit 400, and a client that goes away frees the slot.
. "$TOP/test/integration/lib.sh"

# The trace is in Go 1.26's format.
need_go 26

prog="$BUILD/test/programs/trace_truth"
start_agent truth "$prog"
for i in $(seq 200); do grep -q '^ready' "$WORK/truth.out" && break; sleep 0.05; done
grep -q '^ready' "$WORK/truth.out" || fail "the program did not start its threads"

code=$(curl -sS --max-time 120 -D "$WORK/head" -o "$WORK/trace" -w '%{http_code}' \
    "http://$ADDR/debug/pprof/trace?seconds=2")
[ "$code" = 200 ] || { cat "$WORK/trace"; fail "trace answered $code"; }
grep -qi '^Content-Disposition: attachment; filename="trace"' "$WORK/head" || fail "no trace attachment header"
kill -USR1 "$PID"
for i in $(seq 200); do grep -q '^done' "$WORK/truth.out" && break; sleep 0.05; done
grep -q '^done' "$WORK/truth.out" || fail "the program did not print its waits"

"$GO" tool trace -d=parsed "$WORK/trace" >"$WORK/parsed" 2>"$WORK/parsed.err" ||
    { cat "$WORK/parsed.err"; fail "go tool trace cannot read the trace"; }
[ ! -s "$WORK/parsed.err" ] || { cat "$WORK/parsed.err"; fail "go tool trace warns"; }

# The window: the trace's first and last times (CLOCK_MONOTONIC ns, as
# the program's own clock).
w0=$(sed -n 's/.* Sync Time=\([0-9]*\) .*/\1/p' "$WORK/parsed" | head -n 1)
w1=$(sed -n 's/.* Sync Time=\([0-9]*\) .*/\1/p' "$WORK/parsed" | tail -n 1)
note "window $w0 .. $w1 ($(( (w1 - w0) / 1000000 )) ms)"

# measured KIND: the program's waits of KIND inside the window, in ms.
measured() {
    awk -v k="$1" -v a="$w0" -v b="$w1" '$1 == "wait" && $2 == k && $3 >= a && $4 <= b { s += $4 - $3 }
        END { printf "%.2f", s / 1e6 }' "$WORK/truth.out"
}
for case in sync:lock:lock_waiter syscall:pipe:pipe_reader net:sock:sock_reader; do
    kind=${case%%:*}; rest=${case#*:}; what=${rest%%:*}; fn=${rest#*:}
    top=$(trace_top "$kind") || exit 1
    echo "$top" | head -n 12
    m=$(measured "$what")
    awk -v m="$m" 'BEGIN { exit !(m > 200) }' || fail "$what waits: only $m ms measured in the window: the test measures nothing"
    within 10 "$(flat_ms "$top" "$fn")" "$m" "-pprof=$kind on $fn"
    # Sleeps (all through sleep_us) are in no blocking profile, as Go's.
    expect_not_contains "$top" "sleep_us"
done

# Every thread is a goroutine named by its thread name: the one-frame
# stack of its first status.
names=$(awk '/TransitionStack=/ { getline; if ($2 == "@" && $3 ~ /^0x[1-9a-e][0-9a-f][0-9a-f][0-9a-f]$/) print $1 }' "$WORK/parsed" | sort -u)
for t in $(awk '$1 == "thread" { print $2 }' "$WORK/truth.out"); do
    printf '%s\n' "$names" | grep -qx "$t" || fail "no goroutine named $t (names: $(echo $names))"
done
note "goroutines: $(echo $names)"

tid() { awk -v n="$1" '$1 == "thread" && $2 == n { print $3 }' "$WORK/truth.out"; }
holder=$(tid holder); waiter=$(tid lockwaiter); burner=$(tid burner)
grep -q "^M=$holder .*StateTransition .* GoID=$waiter Waiting->Runnable" "$WORK/parsed" ||
    fail "the lock waiter is never unblocked from the holder's thread"
grep -A3 "G=$burner StackSample" "$WORK/parsed" | grep -q burn_cpu ||
    fail "no CPU sample of the burner in burn_cpu"
note "CPU samples of the burner: $(grep -c "G=$burner StackSample" "$WORK/parsed")"

# Every view of go tool trace answers, and it warns of nothing.
trace_ui "$WORK/trace"
expect_not_contains "$(cat "$WORK/ui.log")" "Encountered error"
for page in / /goroutines "/goroutine?name=lockwaiter" /io /block /syscall /sched \
    /usertasks /userregions "/jsontrace?view=proc" "/jsontrace?view=thread" /mmu; do
    c=$(curl -s -o "$WORK/page" -w '%{http_code}' --max-time 60 "$url$page")
    [ "$c" = 200 ] || fail "go tool trace's $page answered $c"
done
expect_contains "$(curl -s "$url/goroutines")" "goroutine?name=pipereader"
kill "$ui"

# Go's parameter handling.
expect_contains "$(fetch debug/pprof/)" "href='trace?debug=1'>trace</a>"
for q in "seconds=0" "seconds=x" "seconds=0.2"; do
    c=$(curl -s -o "$WORK/t" -w '%{http_code}' --max-time 60 "http://$ADDR/debug/pprof/trace?$q")
    [ "$c" = 200 ] || fail "trace?$q answered $c"
    "$GO" tool trace -d=parsed "$WORK/t" >/dev/null 2>&1 || fail "trace?$q does not parse"
done
c=$(http_status "debug/pprof/trace?flight=1")
[ "$c" = 400 ] || fail "trace?flight=1 without the flight recorder answered $c"
c=$(http_status "debug/pprof/trace?seconds=4000")
[ "$c" = 400 ] || fail "trace?seconds=4000 answered $c"
curl -s -o "$WORK/a" -w '%{http_code}\n' "http://$ADDR/debug/pprof/trace?seconds=1" >"$WORK/a.code" &
a=$!
curl -s -o "$WORK/b" -w '%{http_code}\n' "http://$ADDR/debug/pprof/trace?seconds=1" >"$WORK/b.code" &
b=$!
wait "$a" "$b"
codes=$(cat "$WORK/a.code" "$WORK/b.code" | sort | tr '\n' ' ')
[ "$codes" = "200 500 " ] || fail "two traces at once answered $codes"
expect_contains "$(cat "$WORK/a" "$WORK/b")" "Could not enable tracing: tracing is already enabled"
# A client that goes away frees the slot.
curl -s -o /dev/null --max-time 1 "http://$ADDR/debug/pprof/trace?seconds=30" || true
for i in $(seq 100); do
    c=$(http_status "debug/pprof/trace?seconds=0.1")
    [ "$c" = 200 ] && break
    sleep 0.1
done
[ "$c" = 200 ] || fail "the slot is still taken after the client went away"
echo ok
