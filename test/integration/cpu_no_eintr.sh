# A CPU profile never interrupts a sleeping system call of the host's: a
# thread that wakes every 5 ms to sleep again (test/programs/attach_target:
# its main thread checks every nanosleep returns 0 after its full time,
# while a spinner burns) is profiled at 1000 Hz for 10 s with the default
# sampler, and counts no EINTR. The timer's expiries are sent on the
# thread's way back to user space, after the call; a perf task-clock
# event counting kernel time sends its overflow where it falls, also in
# the kernel on the way into a sleep, which then returns EINTR (1 in each
# of two such 10 s runs here): the reason the timer is the default
# (docs/cpu.md).
. "$TOP/test/integration/lib.sh"

export PPROF_CPU_HZ=1000
start_agent target "$BUILD/test/programs/attach_target" "$WORK/stop"
wait_until "the target started" grep -q started "$WORK/target.out"
fetch 'debug/pprof/profile?seconds=10' > "$WORK/cpu.pb.gz"
note "sampler: $(fetch debug/stats | python3 -c 'import json, sys; print(json.load(sys.stdin)["cpu_sampler"])')"
top=$(pprof -top -nodecount=20 "$WORK/cpu.pb.gz")
expect_contains "$top" busy_spin "the profile"
touch "$WORK/stop"
wait_exit "$PID" 30
tail -n 3 "$WORK/target.out"
expect_contains "$(cat "$WORK/target.out")" "rounds_ok eintr=0 short=0 bad=0" "the target's account"
[ "$STATUS" = 0 ] || fail "the target exited with $STATUS"
echo ok
