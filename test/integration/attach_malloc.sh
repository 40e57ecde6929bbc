# pprof-attach makes its calls (dlopen, the agent's start and stop) only
# where the stopped thread is outside its allocator and the loader
# (attach/safe_point.c). malloc_spin is single-threaded (glibc then takes
# no allocator lock) and spends most of its time inside malloc and free,
# in the heap's growth and trim among them; it checks every block it
# frees. Eight fresh ones, each attached to once while it runs and detached:
# every one must still be running untraced after each step, find its
# blocks intact and exit 0. Stopped at random instead, 5 of 20 aborted
# ("malloc assertion failure in sysmalloc") or found a block overwritten.
. "$TOP/test/integration/lib.sh"

ATTACH="$BUILD/pprof-attach"
[ -x "$ATTACH" ] || fail "no $ATTACH (make test-bins builds it)"

# alive_untraced STEP: PID runs on, not stopped, no tracer.
alive_untraced() {
    kill -0 "$PID" 2>/dev/null ||
        fail "round $round: malloc_spin ended after the $1: $(cat "$WORK/out.$round" "$WORK/err.$round")"
    grep -q '^TracerPid:[[:space:]]*0$' "/proc/$PID/status" &&
        ! grep -q '^State:[[:space:]]*[tT]' "/proc/$PID/status" ||
        fail "round $round: malloc_spin left stopped or traced after the $1"
}

for round in 1 2 3 4 5 6 7 8; do
    rm -f "$WORK/stop"
    "$BUILD/test/programs/malloc_spin" "$WORK/stop" >"$WORK/out.$round" 2>"$WORK/err.$round" &
    PID=$!
    PIDS="$PIDS $PID"
    wait_until "malloc_spin to start" grep -q started "$WORK/out.$round"
    PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>"$WORK/attach.$round" ||
        fail "round $round: pprof-attach failed: $(cat "$WORK/attach.$round")"
    alive_untraced attach
    "$ATTACH" --detach "$PID" 2>"$WORK/detach.$round" ||
        fail "round $round: pprof-attach --detach failed: $(cat "$WORK/detach.$round")"
    alive_untraced detach
    touch "$WORK/stop"
    rc=0
    wait "$PID" || rc=$?
    grep -q '^ok [0-9]' "$WORK/out.$round" && [ "$rc" = 0 ] ||
        fail "round $round: malloc_spin exited $rc: $(cat "$WORK/out.$round" "$WORK/err.$round")"
    note "round $round: $(grep -h 'stopped' "$WORK/attach.$round" "$WORK/detach.$round" | sed 's/^pprof-attach: //' | tr '\n' ' ')"
done
