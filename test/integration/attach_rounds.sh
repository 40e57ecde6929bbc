# pprof-attach and --detach, again and again, on programs under load that
# were started without the agent.
#
# A multithreaded C++ program (attach_cxx: std::thread workers, a
# std::mutex, new and delete; its result does not depend on the timing) is
# attached mid-run: its CPU, allocation and mutex profiles name its
# functions, the agent's own threads are not listed as the program's (a
# server started by an attach records its threads itself), and after a
# detach none of them is left; then 2 more rounds while it runs.
# It prints what a run never attached prints and exits 0 as that one does.
#
# redis-server under redis-benchmark (skipped when not installed): ROUNDS
# attach/detach rounds. Each returns 0; after each attach the threads view
# lists no thread of the agent; after each detach none is left in the
# process and redis answers. At the end the benchmark saw no error, redis
# has the threads it had (jemalloc's background threads aside: the agent's
# threads may make jemalloc start some, as any thread would), and its
# memory did not grow from round 2 to the last by half of what the first
# attach added (the agent's tables stay, built once).
#
# The 100-round form (docs/attach.md), beyond test/run-tests' time limit:
#   ATTACH_ROUNDS=100 BUILD=build AGENT=build/libpprofagent.so TOP=. \
#       bash test/integration/attach_rounds.sh
. "$TOP/test/integration/lib.sh"

ROUNDS=${ATTACH_ROUNDS:-10}
ATTACH="$BUILD/pprof-attach"
CXX_PROG="$BUILD/test/programs/attach_cxx"
[ -x "$ATTACH" ] && [ -x "$CXX_PROG" ] || fail "no $ATTACH or $CXX_PROG (make test-bins builds them)"

# untraced PID: running on, not stopped, no tracer.
untraced() {
    kill -0 "$1" 2>/dev/null || fail "pid $1 ended"
    grep -q '^TracerPid:[[:space:]]*0$' "/proc/$1/status" &&
        ! grep -q '^State:[[:space:]]*[tT]' "/proc/$1/status"
}

# comms PID: its threads' names, sorted, one a line.
comms() { cat /proc/"$1"/task/*/comm 2>/dev/null | sort; }

# agent_gone PID: no thread of the agent is left (civetweb's, pprof*).
agent_gone() { ! comms "$1" | grep -q '^civetweb-\|^pprof'; }

# attach_to PID: attaches on a port of its own; sets ADDR; appends the
# stop line to $WORK/stops.
attach_to() {
    PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$1" 2>"$WORK/attach.err" ||
        { cat "$WORK/attach.err" >&2; fail "pprof-attach $1 failed"; }
    grep 'stopped' "$WORK/attach.err" >>"$WORK/stops"
    ADDR=$(sed -n 's|^pprofagent: serving http://\([^/]*\)/debug/pprof/ (pid [0-9]*)$|\1|p' "$WORK/attach.err")
    [ -n "$ADDR" ] || fail "pprof-attach printed no serving line"
    # The agent's threads are its own: counted apart, none listed.
    g=$(fetch 'debug/pprof/goroutine?debug=2')
    expect_contains "$g" "threads of the agent itself are not listed" "the threads view after the attach"
    expect_not_contains "$g" 'thread "civetweb' "the threads view after the attach"
}

# detach_from PID: detaches; waits for the agent's threads to be gone.
detach_from() {
    "$ATTACH" --detach "$1" 2>>"$WORK/stops" || { cat "$WORK/stops" >&2; fail "pprof-attach --detach $1 failed"; }
    wait_until "the agent's threads to end after the detach" agent_gone "$1"
    untraced "$1" || fail "pid $1 stopped or traced after the detach"
}

# profile_names WHAT PATH PATTERN [pprof args...]: fetches PATH until
# `pprof -top` of it matches PATTERN (what it records comes as the
# program runs); fails after 10 tries.
profile_names() {
    what=$1 path=$2 pattern=$3
    shift 3
    for try in 1 2 3 4 5 6 7 8 9 10; do
        fetch "$path" >"$WORK/p.pb.gz"
        top=$(pprof -top -nodecount=40 "$@" "$WORK/p.pb.gz")
        printf '%s\n' "$top" | grep -q "$pattern" && return 0
        sleep 0.2
    done
    printf '%s\n' "$top" | head -n 20 >&2
    fail "$what names no $pattern"
}

# ---- the C++ program: a run never attached, then one attached mid-run ----
"$CXX_PROG" "$WORK/stop0" >"$WORK/cxx0.out" 2>"$WORK/cxx0.err" &
PID=$!
PIDS="$PIDS $PID"
wait_until "attach_cxx to start" grep -q started "$WORK/cxx0.err"
touch "$WORK/stop0"
wait_exit "$PID" 60
status0=$STATUS

"$CXX_PROG" "$WORK/stop1" >"$WORK/cxx1.out" 2>"$WORK/cxx1.err" &
PID=$!
PIDS="$PIDS $PID"
wait_until "attach_cxx to start" grep -q started "$WORK/cxx1.err"
attach_to "$PID"
profile_names "attach_cxx's CPU profile" 'debug/pprof/profile?seconds=1' 'run_round\|item_value\|worker'
profile_names "attach_cxx's allocations" debug/pprof/allocs 'item_value' -sample_index=alloc_space
profile_names "attach_cxx's mutex profile" debug/pprof/mutex 'worker'
detach_from "$PID"
for i in 1 2; do
    attach_to "$PID"
    detach_from "$PID"
done
touch "$WORK/stop1"
wait_exit "$PID" 60
[ "$STATUS" = "$status0" ] && [ "$STATUS" = 0 ] ||
    { cat "$WORK/cxx1.err" >&2; fail "attach_cxx exited $STATUS attached, $status0 never attached"; }
cmp -s "$WORK/cxx0.out" "$WORK/cxx1.out" ||
    { cat "$WORK/cxx0.out" "$WORK/cxx1.out" >&2; fail "attach_cxx printed other output attached"; }
note "attach_cxx: $(cat "$WORK/cxx1.out"), exit $STATUS, as never attached"

# ---- redis under redis-benchmark ----
for p in redis-server redis-benchmark redis-cli; do
    command -v "$p" >/dev/null 2>&1 || { note "SKIP redis rounds: $p is not installed (scripts/install-deps)"; exit 0; }
done
redis_under_benchmark

rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$PID/status"; }
rss0=$(rss)
comms "$PID" | grep -v '^jemalloc_bg_thd$' >"$WORK/threads0"
for i in $(seq "$ROUNDS"); do
    attach_to "$PID"
    detach_from "$PID"
    [ "$(redis-cli -p "$port" ping)" = PONG ] || fail "redis does not answer after round $i"
    [ "$i" -gt 2 ] || rss2=$(rss)
done
rss_end=$(rss)
note "redis RSS: $rss0 kB before, $rss2 kB after round 2, $rss_end kB after round $ROUNDS"
[ $((rss_end - rss2)) -lt $(((rss2 - rss0) / 2 + 1)) ] ||
    fail "redis's memory grew from round 2 to $ROUNDS by half of what the first attach added"
comms "$PID" | grep -v '^jemalloc_bg_thd$' >"$WORK/threads1"
cmp -s "$WORK/threads0" "$WORK/threads1" ||
    { diff "$WORK/threads0" "$WORK/threads1" >&2; fail "redis's threads differ after the rounds"; }

kill -0 "$B" 2>/dev/null || { tail -c 2000 "$WORK/bench.out" >&2; fail "redis-benchmark ended early"; }
kill "$B"; wait "$B" 2>/dev/null || true
if tr '\r' '\n' <"$WORK/bench.out" | grep -qi error; then
    tr '\r' '\n' <"$WORK/bench.out" | grep -i error | head >&2
    fail "redis-benchmark saw errors"
fi
redis-cli -p "$port" info stats | grep -E '^(total_commands_processed|total_error_replies|rejected_connections):' | tr -d '\r'
[ "$(redis-cli -p "$port" info stats | sed -n 's/^total_error_replies:\([0-9]*\).*/\1/p')" = 0 ] ||
    fail "redis answered errors"
stop_summary "$WORK/stops" "with attach_cxx"
