# A thread the agent never saw start (created past its pthread_create
# interposer, as jemalloc's background threads are) has its waits in the
# block profile under its own function, not under [unknown]: its stack's
# bounds are learnt from /proc/self/maps where the lock hooks may not
# allocate.
. "$TOP/test/integration/lib.sh"

export PPROF_START_DELAY_MS=0
start_agent hidden "$BUILD/test/programs/hidden_thread"
for i in $(seq 100); do grep -q '^done' "$WORK/hidden.out" && break; sleep 0.1; done
grep -q '^done' "$WORK/hidden.out" || fail "the hidden thread's waits never ended"
measured=$(sed -n 's/^waited_ns=//p' "$WORK/hidden.out")
block=$(pprof -top -cum -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/block")
echo "$block"
v=$(printf '%s\n' "$block" | awk '$NF == "hidden_waiter" { v = $4; sub(/ms$/, "", v); print v + 0 }')
note "hidden_waiter: ${v:-no} ms of block, the program measured $((measured / 1000000)) ms"
# Block samples waits at one per PPROF_BLOCK_RATE ns, weighted: 20 waits of
# 10 ms are all recorded. Within 20% of what the program measured.
awk -v v="${v:-0}" -v m="$measured" 'BEGIN { m /= 1e6; exit !(v >= m * 0.8 && v <= m * 1.2) }' \
    || fail "hidden_waiter has ${v:-no} ms of block, the program waited $((measured / 1000000)) ms"
stop "$PID"
echo ok
