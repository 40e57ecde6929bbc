# A program bound to glibc's old pthread_cond_wait/signal (@GLIBC_2.2.5)
# runs under the agent as without it (the agent forwards its waits to the
# old version it asked for), and its waits appear in the block profile.
. "$TOP/test/integration/lib.sh"

prog="$BUILD/test/programs/contention_oldcond"
objdump -T "$prog" | grep -q 'GLIBC_2.2.5) pthread_cond_wait' || fail "the test program is not bound to the old pthread_cond_wait"
start_agent oldcond "$prog"
for i in $(seq 100); do grep -q '^done' "$WORK/oldcond.out" && break; sleep 0.1; done
grep -q '^done' "$WORK/oldcond.out" || fail "the old-version condition variable waits never ended under the agent"
block=$(pprof -top -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/block")
echo "$block"
v=$(printf '%s\n' "$block" | awk '$NF == "old_cond_waiter" { v = $1; sub(/ms$/, "", v); print v }')
awk -v v="${v:-0}" 'BEGIN { exit !(v >= 80 && v <= 200) }' || fail "old_cond_waiter has ${v:-no} ms of block, expected about 100"
stop "$PID"
echo ok
