# pprof-attach on a real service started without the agent: Debian's
# redis-server under redis-benchmark. Attached, the CPU profile names
# redis's own functions and the threads view its threads started before
# (bio_*); then 10 attach/detach rounds while the benchmark runs: every
# round serves, the benchmark sees no error (it loops until the end), redis answers
# as before and is left running, not stopped and not traced. The stop
# times of the rounds are printed.
. "$TOP/test/integration/lib.sh"

for p in redis-server redis-benchmark redis-cli; do
    command -v "$p" >/dev/null 2>&1 || fail "$p is not installed (scripts/install-deps)"
done
ATTACH="$BUILD/pprof-attach"
[ -x "$ATTACH" ] || fail "no $ATTACH (make test-bins builds it)"

redis_under_benchmark

untraced() {
    kill -0 "$PID" 2>/dev/null || fail "redis ended"
    grep -q '^TracerPid:[[:space:]]*0$' "/proc/$PID/status" &&
        ! grep -q '^State:[[:space:]]*[tT]' "/proc/$PID/status"
}

PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>"$WORK/attach.err" ||
    { cat "$WORK/attach.err" >&2; fail "pprof-attach redis failed"; }
cat "$WORK/attach.err"
ADDR=$(sed -n 's|^pprofagent: serving http://\([^/]*\)/.*|\1|p' "$WORK/attach.err")
[ -n "$ADDR" ] || fail "no serving line"
# Enough of redis's CPU to see its functions: 200 ms (20 samples).
for try in 1 2 3 4; do
    fetch 'debug/pprof/profile?seconds=5' >"$WORK/cpu.pb.gz"
    top=$(pprof -top -cum -unit=ms -nodecount=60 "$WORK/cpu.pb.gz")
    total=$(printf '%s\n' "$top" | sed -n 's/.*Total samples = \([0-9.]*\)ms.*/\1/p' | head -n 1)
    note "redis CPU profile: ${total:-0} ms"
    awk -v t="${total:-0}" 'BEGIN { exit !(t >= 200) }' && break
done
echo "$top" | head -n 12
expect_contains "$top" "aeMain" "redis's CPU profile after the attach"
case "$top" in
    *readQueryFromClient* | *writeToClient*) ;;
    *) fail "redis's CPU profile after the attach names neither readQueryFromClient nor writeToClient" ;;
esac
g=$(fetch 'debug/pprof/goroutine?debug=2')
expect_contains "$g" 'thread "bio_' "redis's threads after the attach"
expect_contains "$g" "aeMain(" "redis's main thread after the attach"
"$ATTACH" --detach "$PID" 2>>"$WORK/rounds.err" || { cat "$WORK/rounds.err" >&2; fail "detach"; }

for i in $(seq 10); do
    PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>>"$WORK/rounds.err" >/dev/null ||
        { cat "$WORK/rounds.err" >&2; fail "attach round $i failed"; }
    "$ATTACH" --detach "$PID" 2>>"$WORK/rounds.err" ||
        { cat "$WORK/rounds.err" >&2; fail "detach round $i failed"; }
    untraced || fail "redis stopped or traced after round $i"
done
stop_summary "$WORK/rounds.err" "rounds"

kill -0 "$B" 2>/dev/null || { tail -c 2000 "$WORK/bench.out" >&2; fail "redis-benchmark ended early"; }
kill "$B"; wait "$B" 2>/dev/null || true
tr '\r' '\n' <"$WORK/bench.out" | tail -n 2
if tr '\r' '\n' <"$WORK/bench.out" | grep -qi error; then
    tr '\r' '\n' <"$WORK/bench.out" | grep -i error | head >&2
    fail "redis-benchmark saw errors"
fi
echo "SET k v" | redis-cli -p "$port" >/dev/null
[ "$(echo "GET k" | redis-cli -p "$port")" = v ] || fail "redis answers wrong after the rounds"
untraced || fail "redis stopped or traced at the end"
