# 10,000 short-lived threads created and ended during a CPU profile: every
# one runs, the profile names their code and the main thread's, the
# threadcreate profile counts them all, the host exits as without the agent.
#
# Each thread lives a fraction of a millisecond of CPU, less than a
# scheduler tick, and the kernel notices a thread CPU timer's expiry only
# at a tick that finds the thread running: a tick seldom lands inside one,
# so their own code (short_task) is sampled by chance, a few times a
# profile or not at all (this test once asserted it and failed now and
# then). Their CPU is in the profile all the same: the periods a thread's
# clock went through that no sample stood for are settled when it ends,
# under its start routine (short_thread) and a [cpu not sampled] leaf
# (docs/cpu.md). The main thread's code is asked for by run_threads, in
# every stack of its: on a loaded machine the main thread gets a few tens
# of milliseconds in the window, most in pthread_create and join, and
# main_burn's share of it is sampled by chance too. 250 Hz: more samples.
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/hostile"
export PPROF_CPU_HZ=250
# The churn starts once the profile runs: on a quick machine 10,000
# threads could be done before the deferred server even listened.
start_agent threads env HOSTILE_GO="$WORK/go" "$H" threads 10000 4
(sleep 0.3; touch "$WORK/go") &
fetch 'debug/pprof/profile?seconds=3' > "$WORK/cpu.pb.gz"
top=$(pprof -top -nodecount=200 "$WORK/cpu.pb.gz")
echo "$top" | head -n 30
expect_contains "$top" "short_thread" "CPU profile during thread churn"
expect_contains "$top" "run_threads" "CPU profile during thread churn"
note "cpu note: $(profile_note cpu)"
if wait "$PID"; then status=0; else status=$?; fi
[ "$status" = 0 ] || fail "host exited with $status"
grep -qx 'threads=10000' "$WORK/threads.out" || fail "not every thread ran: $(cat "$WORK/threads.out")"
grep -v '^pprofagent:' "$WORK/threads.err" && fail "the host wrote errors" || true

# The count of created threads, read while the host still runs.
start_agent count "$H" threads 10000 3
# Every thread ran when the host says so (on a loaded machine, well past
# 10 s: the count read before that was short of 10,000 beside two hogs).
wait_until "the host's 10,000 threads" grep -q threads= "$WORK/count.out"
text=$(fetch 'debug/pprof/threadcreate?debug=1')
total=$(printf '%s\n' "$text" | sed -n 's/^threadcreate profile: total \([0-9]*\).*/\1/p')
note "threadcreate total: $total"
[ "${total:-0}" -ge 10000 ] || fail "threadcreate counted ${total:-nothing}, expected >= 10000"
expect_contains "$text" "run_threads"
stop "$PID"
echo ok
