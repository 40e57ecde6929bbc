#!/bin/sh
# CPU profiler cost, side by side in one run, interleaved: a CPU-bound
# two-thread program alone, under the agent idle, under the agent with a
# 100 Hz profile running, and under gperftools' libprofiler (CPUPROFILE,
# 100 Hz). Reports medians of the program's own CPU time for a fixed amount
# of work, as ratios to the program alone, with each configuration's spread
# over the rounds ((max - min) / median: the run's own noise); then the
# handler's cost per sample (median, from the agent's histogram), its
# instructions per sample under callgrind, and what a 1000 Hz request
# really delivers.
#
#   sh test/bench/cpu.sh BUILD_DIR        (CPU_BENCH_ROUNDS=5, CPU_BENCH_ITER=8000)
set -eu
. "$(dirname "$0")/stats.sh"
bench_start "${1:-build}" test/programs/cpu_bench test/programs/cpu_burn
prog="$build/test/programs/cpu_bench"
burn="$build/test/programs/cpu_burn"
gperf=/usr/lib/x86_64-linux-gnu/libprofiler.so.0
rounds=${CPU_BENCH_ROUNDS:-5}
iter=${CPU_BENCH_ITER:-8000}
threads=2

cpu_of() { sed -n 's/.*cpu_ms=\([0-9.]*\).*/\1/p'; }

run_alone() { "$prog" $threads "$iter" 0 | cpu_of; }
run_idle() {
    LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 "$prog" $threads "$iter" 0 | cpu_of
}
run_profiling() {
    rm -f "$work/port" "$work/out"
    LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$work/port" \
        "$prog" $threads "$iter" 1 > "$work/out" &
    pid=$!
    while [ ! -s "$work/port" ] || ! grep -q ready "$work/out"; do sleep 0.02; done
    curl -s -o /dev/null "http://$(cat "$work/port")/debug/pprof/profile?seconds=120" &
    curl_pid=$!
    sleep 0.3
    kill -USR1 "$pid"
    wait "$pid"
    kill "$curl_pid" 2>/dev/null || true
    wait "$curl_pid" 2>/dev/null || true
    cpu_of < "$work/out"
}
run_gperftools() {
    CPUPROFILE="$work/gperf.prof" CPUPROFILE_FREQUENCY=100 LD_PRELOAD="$gperf" \
        "$prog" $threads "$iter" 0 2>/dev/null | cpu_of
}

configs="alone idle profiling gperftools"
[ -e "$gperf" ] || configs="alone idle profiling"
for c in $configs; do : > "$work/$c"; done
for r in $(seq "$rounds"); do
    for c in $configs; do
        run_$c >> "$work/$c"
    done
done

base=$(median "$work/alone")
for c in $configs; do need "the CPU time of '$c'" $(cat "$work/$c"); done
echo "CPU-bound program, $threads threads, fixed work; median of $rounds interleaved runs (process CPU time)"
printf '| %-34s | %10s | %6s | %8s |\n' configuration "CPU ms" ratio "spread"
printf '|%s|%s|%s|%s|\n' "------------------------------------" "------------" "--------" "----------"
for c in $configs; do
    m=$(median "$work/$c")
    case $c in
        alone) label="program alone" ;;
        idle) label="agent loaded, idle" ;;
        profiling) label="agent, 100 Hz profile running" ;;
        gperftools) label="gperftools libprofiler, 100 Hz" ;;
    esac
    printf '| %-34s | %10.1f | %6.3f | %7s%% |\n' "$label" "$m" \
        "$(echo "$m $base" | awk '{print $1 / $2}')" "$(spread "$work/$c")"
done
echo "noise of this run: the program alone's CPU time moved by $(spread "$work/alone")% ((max - min) / median)"
echo "over its $rounds rounds; a ratio closer to 1 than that is not told apart from 1."

# Handler cost per sample and the effective rate at 100 and 1000 Hz.
sample_run() { # hz seconds -> the profile's comment line
    rm -f "$work/port"
    PPROF_CPU_HZ=$1 LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$work/port" \
        "$burn" 1 60 > /dev/null &
    pid=$!
    while [ ! -s "$work/port" ]; do sleep 0.02; done
    curl -s -o "$work/p.pb.gz" "http://$(cat "$work/port")/debug/pprof/profile?seconds=$2"
    # The agent's counters of that profile (profiles carry no comment).
    echo "pprofagent: $(curl -s "http://$(cat "$work/port")/debug/stats" |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["profile_notes"].get("cpu", ""))')"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    ms=$(go tool pprof -top -unit=ms -nodecount=1 "$work/p.pb.gz" 2>/dev/null | sed -n 's/.* of \([0-9.]*\)ms total.*/\1/p')
    echo "  CPU in profile: ${ms} ms over $2 s (one busy thread)"
}
echo
echo "Handler cost and delivered rate (one busy thread):"
echo "100 Hz:"; sample_run 100 5
echo "1000 Hz:"; sample_run 1000 5

# Instructions per sample in the handler (deterministic), with callgrind:
# its inclusive count (unwinding included) over the samples the run's
# profile holds. Under valgrind the HTTP server does not
# answer reliably, so the profile is the whole-run one of PPROF_DUMP_DIR:
# it starts with the program. No valgrind, or no count: the area fails.
command -v valgrind >/dev/null 2>&1 || { echo "bench cpu: valgrind is not installed" >&2; exit 1; }
mkdir -p "$work/dumps"
PPROF_CPU_HZ=100 LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_DUMP_DIR="$work/dumps" \
    valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
    "$prog" $threads 600 0 > /dev/null 2> "$work/vg.err" || true
ir=$(callgrind_annotate --inclusive=yes --threshold=100 "$work/callgrind.out" 2>/dev/null \
    | sed -n 's/^ *\([0-9,]*\) .*cpu_signal\.c:cpu_signal_handler .*/\1/p' | head -n 1 | tr -d ,)
# Samples: the sum of the profile's sample counts (one a handler run that
# recorded a stack).
calls=$(PPROF_TMPDIR="$work/pp" go tool pprof -raw "$work"/dumps/*.cpu.pb.gz 2>/dev/null |
    awk '/^Samples:/ {s = 1; next} /^Locations/ {s = 0}
         s && /^ *[0-9]+ +[0-9]+:/ {n += $1} END {print n + 0}')
need "the handler's instructions under callgrind" "$ir"
need "the samples of the callgrind run" "$calls"
[ "$calls" -gt 0 ] || { echo "bench: no measurement of the handler under callgrind (it never ran)" >&2; exit 1; }
echo
echo "callgrind: $ir instructions in the handler for $calls samples = $((ir / calls)) instructions per sample"
