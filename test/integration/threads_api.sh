# The public API (pprofagent.h) and the threads profile, on one host
# (test/programs/custom_blobs) built against the header and never linked
# with the agent:
# - without the agent it runs and exits 0 (weak symbols, API calls inert);
# - custom profile: 800 handles opened from open_blob, 200 closed: the
#   profile shows 600 at open_blob, the index lists it with 600, and
#   ?seconds= is refused as Go refuses it for custom profiles;
# - labels: CPU samples split between endpoint=/api and endpoint=/static in
#   the proportions of CPU time the host measured itself (thread CPU clock),
#   within 2 points (or 4 sigma of the sample count) over >= 4000 samples
#   where the machine gives the host that much CPU, and as many samples as
#   the measured CPU time gives at 250 Hz; heap samples carry the labels;
# - goroutine?debug=2 lists every host thread (count checked against
#   /proc/PID/task) under its pthread_setname_np name, with its stack;
#   a thread sleeping in nanosleep is listed with its whole stack (walked
#   without a signal) and never interrupted (the host reports any EINTR);
#   debug=0 and debug=1 count every thread.
. "$TOP/test/integration/lib.sh"
prog="$BUILD/test/programs/custom_blobs"

# 1. Without the agent.
out=$("$prog" 1) || fail "custom_blobs without the agent exited $?"
echo "$out"
expect_contains "$out" "agent: absent"
expect_contains "$out" "api checks: ok"

# 2. Under the agent.
export PPROF_CPU_HZ=250 PPROF_HEAP_RATE=65536
start_agent blobs "$prog" 300
for i in $(seq 100); do grep -q '^started' "$WORK/blobs.out" && break; sleep 0.05; done
cat "$WORK/blobs.out"
out=$(cat "$WORK/blobs.out")
expect_contains "$out" "agent: present"
expect_contains "$out" "blobs open: 600"
expect_contains "$out" "api checks: ok"

# Custom profile through go tool pprof and curl.
top=$(pprof -top "http://$ADDR/debug/pprof/example.com/blobs")
echo "$top"
expect_contains "$top" "Type: example.com/blobs"
flat=$(printf '%s\n' "$top" | awk '$6 == "open_blob" {print $1}')
[ "$flat" = 600 ] || fail "open_blob holds '$flat' handles in the profile, expected 600"
text=$(fetch "debug/pprof/example.com/blobs?debug=1")
expect_contains "$text" "example.com/blobs profile: total 600"
expect_contains "$text" "open_blob+"
index=$(fetch "debug/pprof/")
expect_contains "$index" "<tr><td>600</td><td><a href='example.com/blobs?debug=1'>example.com/blobs</a></td></tr>"
[ "$(http_status 'debug/pprof/example.com/blobs?seconds=5')" = 400 ] || fail "seconds on a custom profile is not refused"
expect_contains "$(fetch 'debug/pprof/example.com/blobs?seconds=5')" "not supported for this profile type"
[ "$(http_status 'debug/pprof/example.com/nothing')" = 404 ] || fail "an unknown custom name is not 404"

# Threads: debug=2 lists every host thread, by name.
ntask=$(ls "/proc/$PID/task" | wc -l)
dump=$(fetch "debug/pprof/goroutine?debug=2")
printf '%s\n' "$dump"
nlisted=$(printf '%s\n' "$dump" | grep -c '^goroutine ')
# Every header has Go's shape (parsers of Go dumps such as panicparse need
# it), the thread's name inside the bracket.
bad=$(printf '%s\n' "$dump" | grep '^goroutine ' | grep -Evc '^goroutine [0-9]+ \[[^]]+\]:$' || true)
[ "$bad" = 0 ] || fail "$bad goroutine headers do not match Go's format"
nagent=$(printf '%s\n' "$dump" | sed -n 's/^# pprofagent: \([0-9]*\) threads of the agent.*/\1/p')
note "threads: $ntask in /proc, $nlisted listed, ${nagent:-0} of the agent"
[ "$nlisted" -ge 6 ] || fail "only $nlisted threads listed"
[ $((nlisted + ${nagent:-0})) = "$ntask" ] || fail "listed $nlisted + agent ${nagent:-0} != $ntask threads"
for t in custom_blobs cond-waiter pipe-reader sleeper server-0 server-1; do
    expect_contains "$dump" "thread \"$t\"]:" "the threads dump"
done
# Stacks of threads that were asked: each under its own header.
block() { printf '%s\n' "$dump" | awk -v n="thread \"$1\"]:" '$1 == "goroutine" && index($0, n) {p = 1; next} /^$/ {p = 0} p'; }
expect_contains "$(block cond-waiter)" "wait_forever(...)" "cond-waiter's stack"
expect_contains "$(block pipe-reader)" "read_pipe(...)" "pipe-reader's stack"
expect_contains "$(block server-0)" "server(...)" "server-0's stack"
expect_contains "$(block sleeper)" "sleeper(...)" "sleeper's stack"
expect_not_contains "$(block sleeper)" "[stack unavailable" "sleeper's stack"
expect_contains "$(block sleeper)" "nanosleep" "sleeper's entry"
expect_not_contains "$dump" "thread_start(" "host stacks (agent frames)"

# debug=0 (proto) and debug=1: every host thread counted.
gtop=$(pprof -top "http://$ADDR/debug/pprof/goroutine")
echo "$gtop"
total=$(printf '%s\n' "$gtop" | sed -n 's/.* of \([0-9]*\) total.*/\1/p' | head -n 1)
ntask=$(ls "/proc/$PID/task" | wc -l)
[ $((total + ${nagent:-0})) = "$ntask" ] || fail "goroutine proto counts $total threads, /proc has $ntask (agent ${nagent:-0})"
expect_contains "$(fetch 'debug/pprof/goroutine?debug=1')" "goroutine profile: total $total"
expect_contains "$index" "<a href='goroutine?debug=1'>goroutine</a>"

# 3. Labels split CPU samples in the measured proportions.
measured() { host_figures blobs api; } # "api static" (ns) as the host measured them
for secs in 12 25 45; do
    set -- $(measured); a0=$1; s0=$2
    fetch "debug/pprof/profile?seconds=$secs" > "$WORK/cpu.pb.gz"
    set -- $(measured); a1=$1; s1=$2
    # "pprof -tags" prints per value: "<n> (<pct>%): /api".
    tags=$(pprof -tags -sample_index=samples "$WORK/cpu.pb.gz")
    pa=$(printf '%s\n' "$tags" | awk '$NF == "/api" {print int($1); exit}')
    ps=$(printf '%s\n' "$tags" | awk '$NF == "/static" {print int($1); exit}')
    [ -n "$pa" ] && [ -n "$ps" ] || { echo "$tags"; fail "no endpoint labels in the CPU profile"; }
    note "$secs s profile: /api $pa samples, /static $ps samples"
    [ $((pa + ps)) -ge 4000 ] && break
done
# On a busy machine the host gets less CPU, so fewer samples: the count is
# checked against the CPU time the host measured (250 Hz), and the share
# within 2 points or 4 standard deviations of a sampled share, whichever
# is wider (3.5 points at 3,000 samples of a 60% share).
[ $((pa + ps)) -ge 1000 ] || fail "only $((pa + ps)) labelled samples in the longest profile (need >= 1000)"
awk -v a0="$a0" -v a1="$a1" -v s0="$s0" -v s1="$s1" -v pa="$pa" -v ps="$ps" '
BEGIN {
    ta = (a1 - a0) / ((a1 - a0) + (s1 - s0)) * 100
    sa = pa / (pa + ps) * 100
    d = sa - ta; if (d < 0) d = -d
    n = pa + ps
    p = ta / 100
    tol = 4 * 100 * sqrt(p * (1 - p) / n); if (tol < 2) tol = 2
    expect = ((a1 - a0) + (s1 - s0)) / 1e9 * 250
    printf "# %d labelled samples for %.0f expected from the measured CPU time\n", n, expect
    printf "# /api: measured %.2f%% of the requests CPU, profile %.2f%% (diff %.2f points, allowed %.2f)\n", ta, sa, d, tol
    if (n < 0.7 * expect) { print "# too few samples for the measured CPU time"; exit 1 }
    exit (d <= tol ? 0 : 1)
}' || fail "label shares or sample count differ from the measured CPU"
tags=$(pprof -tags "$WORK/cpu.pb.gz")
expect_contains "$tags" "endpoint:"
expect_contains "$tags" "server-0"

# Heap samples carry the labels of the thread that allocated.
htags=$(pprof -tags -sample_index=alloc_space "http://$ADDR/debug/pprof/heap")
echo "$htags"
expect_contains "$htags" "/api"
expect_contains "$htags" "/static"

# The sleeper was never interrupted by the agent's signal.
expect_not_contains "$(cat "$WORK/blobs.out")" "nanosleep interrupted" "the host's output"
stop "$PID"
echo ok
