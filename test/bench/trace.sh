#!/bin/sh
# Cost of the execution trace (/debug/pprof/trace):
#  - no trace running: callgrind instructions of an interposed read() (the
#    hook is new with the trace) and of an uncontended lock+unlock pair,
#    without and with the agent;
#  - a trace running: the throughput of a lock-heavy program (4 threads on
#    one mutex) and of redis-server under redis-benchmark, without the
#    agent, with the agent idle, and with a trace recording, interleaved
#    round by round; medians, ratios, and each configuration's spread
#    ((max - min) / median over its rounds) measured in the same run.
#
#   sh test/bench/trace.sh BUILD_DIR
#
# Environment: RUNS (default 5), REQUESTS (redis-benchmark -n, 100000).
set -eu
. "$(dirname "$0")/stats.sh"
. "$(dirname "$0")/agent_port.sh"
build=$(cd "${1:-build}" && pwd)
agent=$build/libpprofagent.so
prog=$build/test/programs/trace_bench
cprog=$build/test/programs/contention_bench
runs=${RUNS:-5}
requests=${REQUESTS:-100000}
[ -f "$agent" ] && [ -x "$prog" ] && [ -x "$cprog" ] ||
    { echo "trace bench: build the library and test programs first" >&2; exit 1; }
for t in valgrind redis-server redis-benchmark curl; do
    command -v "$t" >/dev/null || { echo "trace bench: $t is missing (scripts/install-deps)" >&2; exit 1; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
redis=""
cleanup() { [ -z "$redis" ] || kill "$redis" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

# ---- instructions with no trace running ------------------------------------
n=200000
# ir (stats.sh) counts the loop function's instructions, warm-up included:
# n / 10 + n calls.
agent_env="env LD_PRELOAD=$agent PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet valgrind"
r0=$(ir read_loop "$prog" read "$n" -- valgrind)
# shellcheck disable=SC2086
r1=$(ir read_loop "$prog" read "$n" -- $agent_env)
# With no agent thread the process stays single-threaded, as without the
# agent: glibc's read then skips its cancellation steps, and the
# difference is the hook alone.
r2=$(ir read_loop "$prog" read "$n" -- env LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_LOG=quiet valgrind)
l0=$(ir uncontended_loop "$cprog" uncontended "$n" -- valgrind)
# shellcheck disable=SC2086
l1=$(ir uncontended_loop "$cprog" uncontended "$n" -- $agent_env)
[ -n "$r0" ] && [ -n "$r1" ] && [ -n "$r2" ] && [ -n "$l0" ] && [ -n "$l1" ] ||
    { echo "trace bench: callgrind measured nothing" >&2; exit 1; }

echo "trace: instructions per call with no trace running (callgrind, user space)"
echo
echo "| call | without agent | with agent | added |"
echo "|---|---|---|---|"
awk -v a="$r0" -v b="$r2" -v n="$n" 'BEGIN { p = n + int(n / 10)
    printf "| read(2) of one byte, PPROF_ADDR=off (the hook alone: one jump) | %.1f | %.1f | +%.1f |\n", a / p, b / p, (b - a) / p }'
awk -v a="$r0" -v b="$r1" -v n="$n" 'BEGIN { p = n + int(n / 10)
    printf "| read(2), agent serving (a second thread: glibc cancellation steps) | %.1f | %.1f | +%.1f |\n", a / p, b / p, (b - a) / p }'
awk -v a="$l0" -v b="$l1" -v n="$n" 'BEGIN { p = n + int(n / 10)
    printf "| uncontended lock+unlock pair (no trace test on this path) | %.1f | %.1f | +%.1f |\n", a / p, b / p, (b - a) / p }'
echo

# ---- throughput with a trace running -----------------------------------------
# locks MODE: ops/s of the lock-heavy program; MODE none, idle or traced.
locks() {
    case $1 in
    none) "$prog" locks 4 1000 | sed 's/ops_per_s=\([0-9]*\).*/\1/' ;;
    idle) env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet \
        "$prog" locks 4 1000 | sed 's/ops_per_s=\([0-9]*\).*/\1/' ;;
    traced)
        rm -f "$tmp/port"
        env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet \
            PPROF_PORT_FILE="$tmp/port" "$prog" locks 4 1000 wait >"$tmp/locks.out" &
        p=$!
        wait_port "$tmp/port" 200 "the lock program"
        curl -s -o "$tmp/trace" --max-time 60 "http://$(cat "$tmp/port")/debug/pprof/trace?seconds=2"
        kill "$p"; wait "$p" 2>/dev/null || true
        grep -q 'traced=1' "$tmp/locks.out" || { echo "trace bench: the lock program ran outside the trace" >&2; exit 1; }
        sed 's/ops_per_s=\([0-9]*\).*/\1/' "$tmp/locks.out" ;;
    esac
}

# reads MODE: ns per one-byte read (CPU time); MODE idle (agent serving,
# no trace) or traced (every read recorded with its stack).
reads() {
    if [ "$1" = idle ]; then
        env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet \
            "$prog" read 200000 | sed 's/ns_per_call=\([0-9.]*\).*/\1/'
        return
    fi
    rm -f "$tmp/port"
    env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet \
        PPROF_PORT_FILE="$tmp/port" "$prog" read 20000 wait >"$tmp/reads.out" &
    p=$!
    wait_port "$tmp/port" 200 "the read program"
    curl -s -o /dev/null --max-time 60 "http://$(cat "$tmp/port")/debug/pprof/trace?seconds=2"
    kill "$p"; wait "$p" 2>/dev/null || true
    grep -q 'traced=1' "$tmp/reads.out" || { echo "trace bench: the reads ran outside the trace" >&2; exit 1; }
    sed 's/ns_per_call=\([0-9.]*\).*/\1/' "$tmp/reads.out"
}

port=$((20000 + $$ % 20000))
# redis_rps MODE: GET+SET requests per second (mean of the two); MODE none,
# idle, traced (a trace recording through the whole benchmark) or flight
# (the flight recorder on, PPROF_TRACE_FLIGHT=2: its always-on cost).
redis_rps() {
    rm -f "$tmp/port"
    if [ "$1" = none ]; then
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
    elif [ "$1" = flight ]; then
        env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet PPROF_TRACE_FLIGHT=2 \
            redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
    else
        env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet PPROF_PORT_FILE="$tmp/port" \
            redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
    fi
    redis=$!
    for k in $(seq 200); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
    t=""
    if [ "$1" = traced ]; then
        wait_port "$tmp/port" 200 "redis under the agent"
        curl -s -D "$tmp/head" -o "$tmp/rtrace" --max-time 120 \
            "http://$(cat "$tmp/port")/debug/pprof/trace?seconds=60" &
        t=$!
        sleep 0.5 # the trace starts as the request arrives
    fi
    redis-benchmark -p "$port" -t set,get -n "$requests" -q --csv 2>/dev/null |
        awk -F, '/"(SET|GET)"/ { gsub(/"/, "", $2); s += $2; n++ } END { printf "%.0f\n", s / n }'
    [ -z "$t" ] || { kill "$t" 2>/dev/null || true; wait "$t" 2>/dev/null || true; }
    kill "$redis"; wait "$redis" 2>/dev/null || true
    redis=""
}

round=0
while [ $round -lt "$runs" ]; do
    round=$((round + 1))
    reads idle >>"$tmp/n_idle"
    reads traced >>"$tmp/n_traced"
    for m in none idle traced; do
        locks $m >>"$tmp/l_$m"
        redis_rps $m >>"$tmp/r_$m"
    done
    redis_rps flight >>"$tmp/r_flight"
done

row() { # LABEL FILE BASE_MEDIAN
    m=$(median <"$2")
    awk -v l="$1" -v m="$m" -v b="$3" -v z="$(spread "$2")" 'BEGIN {
        printf "| %s | %.0f | %.3f | %s%% |\n", l, m, m / b, z }'
}
echo "trace: throughput, $runs interleaved rounds, medians (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| workload | per second | ratio to no agent | spread |"
echo "|---|---|---|---|"
lb=$(median <"$tmp/l_none"); rb=$(median <"$tmp/r_none")
row "lock-heavy, 4 threads, no agent (ops)" "$tmp/l_none" "$lb"
row "lock-heavy, agent idle" "$tmp/l_idle" "$lb"
row "lock-heavy, trace recording" "$tmp/l_traced" "$lb"
row "redis GET+SET, no agent (requests)" "$tmp/r_none" "$rb"
row "redis, agent idle" "$tmp/r_idle" "$rb"
row "redis, trace recording" "$tmp/r_traced" "$rb"
row "redis, flight recorder on (PPROF_TRACE_FLIGHT=2)" "$tmp/r_flight" "$rb"
echo
n0=$(median <"$tmp/n_idle"); n1=$(median <"$tmp/n_traced")
awk -v a="$n0" -v b="$n1" -v z0="$(spread "$tmp/n_idle")" -v z1="$(spread "$tmp/n_traced")" 'BEGIN {
    printf "one-byte read, agent serving: %.1f ns with no trace (spread %s%%), %.1f ns recorded (spread %s%%): %+.1f ns per recorded call\n", a, z0, b, z1, b - a }'
