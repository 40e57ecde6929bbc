# The agent's footprint in a served process: at most 3 threads of its own
# at idle (civetweb's listener and two workers), and concurrent requests
# that wait (CPU profiles) do not starve quick ones; the count is the same
# afterwards.
. "$TOP/test/integration/lib.sh"

# batch_job has one thread of its own: every other one is the agent's.
start_agent idle "$BUILD/test/programs/batch_job" wait 0 60
agent_threads() {
    n=0
    for t in /proc/$PID/task/*; do
        [ "${t##*/}" = "$PID" ] && continue
        n=$((n + 1))
        printf '%s ' "$(cat "$t/comm")" >&2
    done
    echo >&2
    echo $n
}
n=$(agent_threads)
note "agent threads at idle: $n"
[ "$n" -le 3 ] || fail "$n agent threads at idle, want at most 3"

# Two CPU profiles and a goroutine dump at once: the first profile is
# served, the second refused at once as Go refuses it, and the dump is
# answered while the profile runs.
start=$(date +%s%N)
curl -s -o "$WORK/p1" -w '%{http_code}' --max-time 30 "http://$ADDR/debug/pprof/profile?seconds=3" > "$WORK/p1.code" &
c1=$!
curl -s -o "$WORK/p2" -w '%{http_code}' --max-time 30 "http://$ADDR/debug/pprof/profile?seconds=3" > "$WORK/p2.code" &
c2=$!
sleep 0.3
g=$(curl -s -o "$WORK/g" -w '%{http_code}' --max-time 30 "http://$ADDR/debug/pprof/goroutine?debug=1")
took=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$g" = 200 ] || fail "goroutine during the profiles: $g"
expect_contains "$(cat "$WORK/g")" "goroutine profile: total" "goroutine"
[ "$took" -lt 2800 ] || fail "goroutine answered after $took ms: it waited for the profile"
wait $c1 $c2
codes=$( (cat "$WORK/p1.code"; echo; cat "$WORK/p2.code"; echo) | sort | tr "\n" " ")
[ "$codes" = "200 500 " ] || fail "two concurrent CPU profiles answered $codes, want 200 and Go's 500"
note "goroutine answered in $took ms during a CPU profile; profiles: $codes"

n=$(agent_threads)
[ "$n" -le 3 ] || fail "$n agent threads after the requests, want at most 3"
stop "$PID"
echo ok
