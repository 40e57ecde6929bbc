# 10,000 short-lived threads created and ended during a CPU profile: every
# one runs, the profile names their code and the main thread's, the
# threadcreate profile counts them all, the host exits as without the agent.
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/hostile"
# The churn starts once the profile runs: on a quick machine 10,000
# threads could be done before the deferred server even listened.
start_agent threads env HOSTILE_GO="$WORK/go" "$H" threads 10000 4
(sleep 0.3; touch "$WORK/go") &
fetch 'debug/pprof/profile?seconds=3' > "$WORK/cpu.pb.gz"
top=$(pprof -top -nodecount=30 "$WORK/cpu.pb.gz")
echo "$top" | head -n 20
expect_contains "$top" "short_task" "CPU profile during thread churn"
expect_contains "$top" "main_burn" "CPU profile during thread churn"
if wait "$PID"; then status=0; else status=$?; fi
[ "$status" = 0 ] || fail "host exited with $status"
grep -qx 'threads=10000' "$WORK/threads.out" || fail "not every thread ran: $(cat "$WORK/threads.out")"
grep -v '^pprofagent:' "$WORK/threads.err" && fail "the host wrote errors" || true

# The count of created threads, read while the host still runs.
start_agent count "$H" threads 10000 3
for i in $(seq 100); do grep -q threads= "$WORK/count.out" && break; sleep 0.1; done
text=$(fetch 'debug/pprof/threadcreate?debug=1')
total=$(printf '%s\n' "$text" | sed -n 's/^threadcreate profile: total \([0-9]*\).*/\1/p')
note "threadcreate total: $total"
[ "${total:-0}" -ge 10000 ] || fail "threadcreate counted ${total:-nothing}, expected >= 10000"
expect_contains "$text" "run_threads"
stop "$PID"
echo ok
