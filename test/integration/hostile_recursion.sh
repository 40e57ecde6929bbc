# Recursion 10,000 frames deep, then a 64 MiB allocation, a thread
# creation and CPU burn at the bottom: CPU, heap and threadcreate stacks
# are cut at the agent's depth, marked [truncated], and nothing crashes.
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/hostile"
start_agent deep "$H" recurse 10000 120
for i in $(seq 600); do grep -q '^at the bottom' "$WORK/deep.out" && break; sleep 0.05; done
grep -q '^at the bottom' "$WORK/deep.out" || fail "the program did not reach the bottom in 30 s"
fetch 'debug/pprof/profile?seconds=2' > "$WORK/cpu.pb.gz"
traces=$(pprof -traces "$WORK/cpu.pb.gz")
expect_contains "$traces" "deep_leaf" "CPU traces"
expect_contains "$traces" "[truncated]" "CPU traces"
expect_not_contains "$traces" "main" "CPU traces of a 10,000-deep stack"

fetch debug/pprof/heap > "$WORK/heap.pb.gz"
traces=$(pprof -traces -sample_index=inuse_space "$WORK/heap.pb.gz")
expect_contains "$traces" "[truncated]" "heap traces"
expect_contains "$traces" "recurse" "heap traces"
mb=$(pprof -top -sample_index=inuse_space -unit=MB "$WORK/heap.pb.gz" | sed -n 's/.* of \([0-9.]*\)MB total.*/\1/p' | head -n 1)
note "heap in use: ${mb}MB"
awk -v m="${mb:-0}" 'BEGIN { exit !(m >= 48 && m <= 96) }' || fail "heap in use ${mb}MB, expected about 64"

text=$(fetch 'debug/pprof/threadcreate?debug=1')
expect_contains "$text" "truncated" "threadcreate text"
expect_contains "$text" "recurse" "threadcreate text"
kill -USR1 "$PID"
if wait "$PID"; then status=0; else status=$?; fi
[ "$status" = 0 ] || fail "host exited with $status"
grep -qx 'recursed, returned 1' "$WORK/deep.out" || fail "host output changed"
echo ok
