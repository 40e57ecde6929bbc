#!/bin/sh
# Cost of the lock interposers: a contended-mutex workload and an
# uncontended lock/unlock loop, without and with the agent at its default
# settings, interleaved run by run; medians, ratios, ns added per
# uncontended lock+unlock pair, and callgrind instructions per pair.
#
#   sh test/bench/contention.sh BUILD_DIR
#
# Environment: RUNS (default 9), THREADS (4), ROUNDS (200000 per thread),
# PAIRS (20000000), and AGENT_ENV, extra settings for the agent runs (to
# compare other rates with the same script).
set -eu
build=$(cd "${1:-build}" && pwd)
agent=${AGENT:-$build/libpprofagent.so}
prog="$build/test/programs/contention_bench"
runs=${RUNS:-9}
threads=${THREADS:-4}
rounds=${ROUNDS:-200000}
pairs=${PAIRS:-20000000}
agent_env=${AGENT_ENV:-}
[ -x "$prog" ] || make -s "$prog" >/dev/null
[ -f "$agent" ] || { echo "contention bench: $agent is missing" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

under_agent() {
    # shellcheck disable=SC2086
    env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet $agent_env "$@"
}

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

i=0
while [ $i -lt "$runs" ]; do
    i=$((i + 1))
    "$prog" contended "$threads" "$rounds" | sed 's/.*wall_ms=\([0-9.]*\).*/\1/' >>"$tmp/c0"
    under_agent "$prog" contended "$threads" "$rounds" | sed 's/.*wall_ms=\([0-9.]*\).*/\1/' >>"$tmp/c1"
    "$prog" uncontended "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/u0"
    under_agent "$prog" uncontended "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/u1"
done

c0=$(median <"$tmp/c0"); c1=$(median <"$tmp/c1")
u0=$(median <"$tmp/u0"); u1=$(median <"$tmp/u1")

# Instructions inside the loop only (--toggle-collect), warm-up included:
# n/10 + n pairs.
n=200000
ir() {
    "$@" --tool=callgrind --toggle-collect=uncontended_loop \
        --callgrind-out-file="$tmp/cg.out" "$prog" uncontended "$n" >/dev/null 2>&1
    awk '/^totals:/ {print $2}' "$tmp/cg.out"
}
i0=$(ir valgrind)
i1=$(ir env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet $agent_env valgrind)

echo "contention: $runs interleaved runs, medians; agent settings: defaults${agent_env:+ + $agent_env}"
echo
echo "| workload | without agent | with agent | ratio / added |"
echo "|---|---|---|---|"
awk -v a="$c0" -v b="$c1" -v t="$threads" -v r="$rounds" 'BEGIN {
    printf "| contended mutex, %d threads x %d rounds (wall ms) | %.1f | %.1f | %.3f |\n", t, r, a, b, b / a }'
awk -v a="$u0" -v b="$u1" 'BEGIN {
    printf "| uncontended lock+unlock pair (ns, CPU time) | %.2f | %.2f | +%.2f ns |\n", a, b, b - a }'
awk -v a="$i0" -v b="$i1" -v n="$n" 'BEGIN {
    p = n + int(n / 10)
    printf "| uncontended pair, callgrind instructions | %.1f | %.1f | +%.1f |\n", a / p, b / p, (b - a) / p }'
