# A wall profile and a CPU profile together on a thread that runs with its
# stack pointer outside its stack (test/programs/offstack, as Erlang's JIT
# runs): where only the interrupted instruction is known, a wall sample
# that lands inside the CPU profile's handler (both timers run on the
# thread's CPU clock and often expire at the same tick) is charged to the
# host instruction the handler interrupted, never to the agent's handler.
# Before, a third of the thread's wall samples were a one-frame stack
# cpu_signal_handler.
. "$TOP/test/integration/lib.sh"

start_agent off "$BUILD/test/programs/offstack" 60
fetch 'debug/pprof/profile?seconds=3' > "$WORK/cpu.pb.gz" &
CURL=$!
fetch 'debug/pprof/wall?seconds=3' > "$WORK/wall.pb.gz"
wait "$CURL"
stop "$PID"
top=$(pprof -top -sample_index=wall -tagfocus=thread=offstack "$WORK/wall.pb.gz")
echo "$top" | head -n 10
expect_contains "$top" "spin" "the thread's wall profile"
expect_not_contains "$top" "signal_handler" "the thread's wall profile"
top=$(pprof -top "$WORK/cpu.pb.gz")
expect_contains "$top" "spin" "the CPU profile"
expect_not_contains "$top" "signal_handler" "the CPU profile"
echo ok
