#!/bin/sh
# Cost of the public API and of the threads profile:
# - a label change (save, set, restore) and a custom-profile add+remove, in
#   a host built against pprofagent.h, without the agent (weak symbols: the
#   calls do nothing) and with it, interleaved, medians of RUNS; plus
#   callgrind instructions per operation (deterministic);
# - the wall time of a /debug/pprof/goroutine dump with 10, 100 and 1000
#   threads waiting on a condition variable (median of RUNS requests).
#
#   sh test/bench/api.sh BUILD_DIR
set -eu
. "$(dirname "$0")/stats.sh"
build=$(cd "${1:-build}" && pwd)
agent=${AGENT:-$build/libpprofagent.so}
prog="$build/test/programs/api_bench"
runs=${RUNS:-7}
ops=${OPS:-2000000}
[ -x "$prog" ] || make -s "$prog" >/dev/null
[ -f "$agent" ] || { echo "api bench: $agent is missing" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT

under_agent() { env LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_LOG=quiet "$@"; }
nsop() { sed -n 's/.* \([0-9.]*\) ns\/op/\1/p'; }

i=0
while [ $i -lt "$runs" ]; do
    i=$((i + 1))
    "$prog" labels "$ops" | nsop >>"$tmp/l0"
    under_agent "$prog" labels "$ops" | nsop >>"$tmp/l1"
    "$prog" custom "$ops" | nsop >>"$tmp/c0"
    under_agent "$prog" custom "$ops" | nsop >>"$tmp/c1"
done
for f in l0 l1 c0 c1; do need "api timings ($f)" $(cat "$tmp/$f"); done
l0=$(median <"$tmp/l0"); l1=$(median <"$tmp/l1")
c0=$(median <"$tmp/c0"); c1=$(median <"$tmp/c1")

# Instructions per operation: the loop function only, n and 2n operations,
# the difference divided by n (start-up and first-use costs cancel out).
ir() { # mode fn n [env...]
    mode=$1; fn=$2; n=$3; shift 3
    "$@" valgrind --tool=callgrind --toggle-collect="$fn" \
        --callgrind-out-file="$tmp/cg.out" "$prog" "$mode" "$n" >/dev/null 2>&1
    awk '/^totals:/ {print $2}' "$tmp/cg.out"
}
per_op() { # mode fn [env...]
    m=$1; f=$2; shift 2
    a=$(ir "$m" "$f" 20000 "$@"); b=$(ir "$m" "$f" 40000 "$@")
    awk -v a="$a" -v b="$b" 'BEGIN {printf "%.0f", (b - a) / 20000}'
}
il0=$(per_op labels labelled env)
il1=$(per_op labels labelled env LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_LOG=quiet)
ic0=$(per_op custom custom env)
ic1=$(per_op custom custom env LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_LOG=quiet)

need "the api area's callgrind counts" "$il0" "$il1" "$ic0" "$ic1"
echo "api: $runs interleaved runs of $ops operations, medians"
echo
echo "| operation | without agent | with agent | instructions without / with |"
echo "|---|---|---|---|"
echo "| label change (save, set, restore) | $l0 ns | $l1 ns | $il0 / $il1 |"
echo "| custom profile add + remove (stack captured) | $c0 ns | $c1 ns | $ic0 / $ic1 |"
echo

# Goroutine dumps.
echo "| threads waiting | goroutine dump, debug=0 (median) | per thread | debug=2 (median) |"
echo "|---|---|---|---|"
for n in 10 100 1000; do
    port="$tmp/port.$n"
    env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$port" \
        PPROF_LOG=quiet "$prog" threads "$n" >/dev/null &
    pid=$!
    pids="$pids $pid"
    for k in $(seq 200); do [ -s "$port" ] && break; sleep 0.05; done
    sleep 1
    addr=$(cat "$port")
    curl -s -o /dev/null "http://$addr/debug/pprof/goroutine?debug=2" # warm-up (symbols)
    : >"$tmp/g0"; : >"$tmp/g2"
    k=0
    while [ $k -lt "$runs" ]; do
        k=$((k + 1))
        curl -s -o /dev/null -w '%{time_total}\n' "http://$addr/debug/pprof/goroutine" >>"$tmp/g0"
        curl -s -o /dev/null -w '%{time_total}\n' "http://$addr/debug/pprof/goroutine?debug=2" >>"$tmp/g2"
    done
    g0=$(median <"$tmp/g0"); g2=$(median <"$tmp/g2")
    awk -v n="$n" -v a="$g0" -v b="$g2" 'BEGIN {
        printf "| %d | %.1f ms | %.1f us | %.1f ms |\n", n, a * 1000, a * 1e6 / n, b * 1000 }'
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
