# /debug/pprof/profile behaves as Go's: headers, 400 on a bad seconds,
# Go's 500 for a second concurrent profile, a client that disconnects
# frees the slot; samplers (CPU timers or perf events, docs/cpu.md) exist
# only while a profile runs; a host with its own SIGPROF handler and
# setitimer keeps both and still gets profiled.
. "$TOP/test/integration/lib.sh"

# The per-thread samplers: POSIX timers, or perf events (descriptors).
timers() {
    n=$(grep -c '^ID:' "/proc/$PID/timers" 2>/dev/null || true)
    p=$(ls -l "/proc/$PID/fd" 2>/dev/null | grep -c 'anon_inode:\[perf_event\]' || true)
    echo $((${n:-0} + ${p:-0}))
}

start_agent burn "$BUILD/test/programs/cpu_burn" 3 120
sleep 0.3

for bad in abc -1 0 3601 1.5; do
    status=$(http_status "debug/pprof/profile?seconds=$bad")
    [ "$status" = 400 ] || fail "seconds=$bad gave $status, expected 400"
done
body=$(fetch 'debug/pprof/profile?seconds=abc')
expect_contains "$body" 'invalid value for "seconds"'

[ "$(timers)" = 0 ] || fail "timers exist before any profile: $(cat /proc/$PID/timers)"

# A profile in flight: timers on every host thread (main + 3 burners),
# none on the agent's; a second request is refused as Go refuses it.
curl -s -D "$WORK/h1" -o "$WORK/p1.pb.gz" "http://$ADDR/debug/pprof/profile?seconds=3" &
CURL=$!
# On a busy machine the request can take a while to start the profile.
four_timers() { [ "$(timers)" -ge 4 ]; }
wait_until "4 timers (main + 3 burners) during the profile" four_timers
n=$(timers)
note "timers during the profile: $n"
[ "$n" = 4 ] || fail "expected 4 timers (main + 3 burners), found $n"
headers=$(curl -s -D - -o "$WORK/busy" "http://$ADDR/debug/pprof/profile?seconds=1")
expect_contains "$headers" "500"
expect_contains "$headers" "X-Go-Pprof: 1"
[ "$(cat "$WORK/busy")" = "Could not enable CPU profiling: cpu profiling already in use" ] \
    || fail "busy body: $(cat "$WORK/busy")"
wait $CURL
expect_contains "$(cat "$WORK/h1")" "Content-Type: application/octet-stream"
expect_contains "$(cat "$WORK/h1")" 'Content-Disposition: attachment; filename="profile"'
raw=$(pprof -raw "$WORK/p1.pb.gz")
expect_contains "$raw" "Period: 10000000"
printf '%s\n' "$raw" | grep -Eq '^Duration: (2\.9|3)' || fail "duration is not about 3 s"
no_timers() { [ "$(timers)" = 0 ]; }
wait_until "timers left after the profile" no_timers

# A client that goes away stops the profile and frees the slot.
curl -s --max-time 1 -o /dev/null "http://$ADDR/debug/pprof/profile?seconds=60" || true
ok=""
for i in $(seq 30); do
    if [ "$(http_status 'debug/pprof/profile?seconds=1')" = 200 ]; then ok=1; break; fi
    sleep 0.2
done
[ -n "$ok" ] || fail "the slot stayed taken after the client went away"
wait_until "timers left after an abandoned profile" no_timers

index=$(fetch debug/pprof/)
expect_contains "$index" "<a href='profile?debug=1'>profile</a>"
stop "$PID"

# A host with its own SIGPROF handler and ITIMER_PROF.
start_agent sigprof "$BUILD/test/programs/cpu_sigprof" 60
sleep 1.5
last() { tail -n 1 "$WORK/sigprof.out"; }
set -- $(last); before=${1#sigprof=}; cpu0=${2#cpu_ms=}
fetch 'debug/pprof/profile?seconds=3' > "$WORK/sp.pb.gz"
sleep 1.2
set -- $(last); after=${1#sigprof=}; cpu1=${2#cpu_ms=}
# ITIMER_PROF at 100 Hz of the process's CPU time: as many signals as the
# CPU the host got (it prints both once a second), whatever the load.
expected=$(( (cpu1 - cpu0) / 10 ))
note "host SIGPROF count: $before before, $after after; $((cpu1 - cpu0)) ms of process CPU meanwhile"
[ "$expected" -ge 20 ] || fail "the host got only $((cpu1 - cpu0)) ms of CPU: nothing to compare"
[ $((2 * (after - before))) -ge "$expected" ] || fail "the host's own SIGPROF stopped ($before -> $after, $expected expected)"
top=$(pprof -top "$WORK/sp.pb.gz")
expect_contains "$top" "own_burn" "profile of the SIGPROF host"
comments=$(pprof -comments "$WORK/sp.pb.gz")
echo "$comments"
expect_not_contains "$comments" "(signal 27)" "the profile comment"
kill -0 "$PID" || fail "the SIGPROF host died"
stop "$PID"
echo ok
