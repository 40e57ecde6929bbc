#!/bin/sh
# Cost of the flame graph, stats and charts endpoints, measured where it
# lands: the host process's CPU time per request (the agent serves on the
# host's own threads), interleaved rounds, medians. The host is
# flame_host in quiet mode (48 MiB of sampled heap, no CPU of its own), so
# every tick of its CPU clock during a batch of requests is the agent's.
# Then the time and instructions (callgrind) to read back and draw a
# synthetic profile of 1000, 10000 and 100000 samples.
#
#   sh test/bench/flamegraph.sh BUILD_DIR   (FLAME_BENCH_ROUNDS=5, FLAME_BENCH_N=40)
set -eu
. "$(dirname "$0")/stats.sh"
bench_start "${1:-build}" test/programs/flame_host test/unit/test_flamegraph
host="$build/test/programs/flame_host"
unit="$build/test/unit/test_flamegraph"
rounds=${FLAME_BENCH_ROUNDS:-5}
n=${FLAME_BENCH_N:-40}

LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$work/port" \
    "$host" 600 quiet > "$work/out" 2>/dev/null &
pid=$!
pids=$pid
while ! grep -q grown "$work/out" 2>/dev/null; do sleep 0.1; done
addr=$(cat "$work/port")

# Host CPU time in ms, summed over its threads from schedstat (ns
# resolution; /proc/PID/stat counts 10 ms ticks, too coarse here).
cpu_ms() {
    cat /proc/"$pid"/task/*/schedstat | awk '{ s += $1 } END { printf "%.3f\n", s / 1e6 }'
}

# One batch: n requests to a path; appends host CPU ms per request and the
# median latency (ms) to $work/<name>.cpu and .lat.
batch() {
    name=$1; path=$2
    before=$(cpu_ms)
    for i in $(seq "$n"); do
        curl -s -o /dev/null -w '%{time_total}\n' "http://$addr/$path"
    done > "$work/lat.tmp"
    after=$(cpu_ms)
    echo "$before $after $n" | awk '{ printf "%.3f\n", ($2 - $1) / $3 }' >> "$work/$name.cpu"
    sort -n "$work/lat.tmp" | awk '{ v[NR] = $1 * 1000 } END { printf "%.2f\n", v[int((NR + 1) / 2)] }' >> "$work/$name.lat"
}

names="idle stats charts heap flame_heap"
for r in $(seq "$rounds"); do
    # idle: the same time with no request, to see the host's own noise.
    before=$(cpu_ms); sleep 1; after=$(cpu_ms)
    echo "$before $after $n" | awk '{ printf "%.3f\n", ($2 - $1) / $3 }' >> "$work/idle.cpu"
    echo 0 >> "$work/idle.lat"
    batch stats debug/stats
    batch charts debug/charts
    batch heap debug/pprof/heap
    batch flame_heap "debug/pprof/flamegraph?profile=heap"
done

heap_cpu=$(median "$work/heap.cpu")
echo "host CPU per request (ms, median of $rounds rounds of $n requests):"
printf '%-22s %10s %14s %14s\n' endpoint cpu_ms latency_ms vs_heap_proto
for c in $names; do
    cpu=$(median "$work/$c.cpu")
    lat=$(median "$work/$c.lat")
    ratio=$(awk -v a="$cpu" -v b="$heap_cpu" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
    printf '%-22s %10s %14s %14s\n' "$c" "$cpu" "$lat" "$ratio"
done
stats_cpu=$(median "$work/stats.cpu")
awk -v c="$stats_cpu" 'BEGIN { printf "a charts page polling once a second costs the host %.3f%% of one core\n", c / 10 }'
svg_bytes=$(curl -s "http://$addr/debug/pprof/flamegraph?profile=heap" | wc -c)
echo "heap flame graph of the host: $svg_bytes bytes"

echo "read back and draw a synthetic profile (best of 5; instructions from callgrind):"
printf '%-10s %10s %12s %10s %16s\n' samples gz_bytes svg_bytes ms instructions
for s in 1000 10000 100000; do
    line=$("$unit" bench "$s" 5)
    ir=""
    if command -v valgrind >/dev/null; then
        valgrind --tool=callgrind --toggle-collect=bench_read_and_draw \
            --callgrind-out-file="$work/cg.out" "$unit" bench "$s" 1 >/dev/null 2>"$work/cg.err" || true
        ir=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$work/cg.out" 2>/dev/null | head -n 1)
    fi
    echo "$line" | awk -v ir="${ir:--}" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
        printf "%-10s %10s %12s %10s %16s\n", f["samples"], f["gz_bytes"], f["svg_bytes"], f["best_ms"], ir }'
done
