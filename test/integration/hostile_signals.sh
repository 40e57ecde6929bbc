# Threads that block every signal during a CPU profile: the profile ends on
# time and names the unblocked thread's code; when the blocked threads
# later unblock everything, no profiling signal left pending kills or
# disturbs them. (A host with its own SIGPROF handler and ITIMER_PROF is
# covered by cpu_endpoint.sh.)
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/hostile"
export PPROF_CPU_HZ=1000
start_agent masked "$H" masked 5
sleep 0.3
start=$(date +%s)
fetch 'debug/pprof/profile?seconds=2' > "$WORK/cpu.pb.gz"
took=$(( $(date +%s) - start ))
[ "$took" -le 10 ] || fail "a 2 s profile took ${took}s"
top=$(pprof -top -nodecount=20 "$WORK/cpu.pb.gz")
echo "$top" | head -n 12
expect_contains "$top" "open_burn"
if wait "$PID"; then status=0; else status=$?; fi
[ "$status" = 0 ] || fail "host exited with $status (a pending profiling signal?)"
[ "$(grep -c 'masked rounds>0: 1' "$WORK/masked.out")" = 2 ] || fail "masked threads: $(cat "$WORK/masked.out")"
grep -qx 'masked done' "$WORK/masked.out" || fail "no 'masked done'"
echo ok
