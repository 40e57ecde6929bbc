# Thread cancellation through the interposed locks. A worker pool whose
# workers take a contended mutex, push their cleanup handler once they hold
# it and test for cancellation after unlocking, cancelled round after round
# while every contention is sampled (block rate 1 ns, mutex fraction 1): the
# agent's stack capture inside pthread_mutex_lock must never act on the
# pending cancel (the mutex would stay held by a dead thread and the pool
# deadlock). And threads blocked in real cancellation points
# (pthread_cond_wait, sem_wait) are still cancelled there.
. "$TOP/test/integration/lib.sh"

P="$BUILD/test/programs/cancel_pool"
export PPROF_BLOCK_RATE=1 PPROF_MUTEX_FRACTION=1 PPROF_ADDR=off
for run in 1 2 3; do
    if LD_PRELOAD="$AGENT" timeout 120 "$P" pool 100 >"$WORK/pool.out" 2>&1; then
        status=0
    else
        status=$?
    fi
    cat "$WORK/pool.out"
    [ "$status" = 0 ] || fail "run $run: the pool exited with $status: $(cat "$WORK/pool.out")"
    grep -q '^pool rounds=100 cancelled=400 ' "$WORK/pool.out" || fail "run $run: not every worker was cancelled"
done

LD_PRELOAD="$AGENT" timeout 120 "$P" waits 50 >"$WORK/waits.out" 2>&1 || fail "waits: $(cat "$WORK/waits.out")"
cat "$WORK/waits.out"
grep -qx 'waits rounds=50' "$WORK/waits.out" || fail "waits: $(cat "$WORK/waits.out")"
echo ok
