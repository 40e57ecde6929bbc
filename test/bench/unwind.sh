#!/bin/sh
# Stack walk cost.
#
# 1. The table-driven walker against libunwind's cached unw_backtrace and
#    gperftools' CPU-profiler unwinder (libprofiler's ProfilerGetStackTrace,
#    what its SIGPROF handler calls), from the same call sites in -O2 code
#    without frame pointers (test_cfi_walk's bench mode), at three depths.
#    Instructions per walk with callgrind (deterministic), and the median
#    time per walk of 11 batches of 1000 (thread CPU time, so preemption
#    does not read as cost).
# 2. A CPU sample of a 20-frame stack: test/programs/deep_spin under the
#    agent's whole-run CPU profile (PPROF_DUMP_DIR) in callgrind, the
#    signal handler's and its walk's instructions per sample. libprofiler
#    cannot be counted this way: it checks RunningOnValgrind and its timer
#    signal then kills the program; its unwinder is in table 1.
# 3. A heap sample's capture: heap_bench's malloc+free loop with every
#    allocation sampled (PPROF_HEAP_RATE=1), stack_capture_from's
#    instructions per call (the walk starts at the sampler's caller: 1
#    agent frame walked and dropped, 5 host frames kept).
# 4. Table memory per MB of code and build time, in a python3 process
#    that imports json, decimal and sqlite3 (PPROF_LOG=debug prints each
#    rebuild; rebuilds after the first compile only the new objects, so
#    the build time is their sum; the lines of short-lived processes the
#    interpreter starts meanwhile, whose object counts start again, are
#    left out). Median of 5 runs; times are wall time on whatever else the
#    machine is doing.
#
#   sh test/bench/unwind.sh BUILD_DIR
set -eu
build=$(cd "${1:-build}" && pwd)
bin="$build/test/unit/test_cfi_walk"
agent="$build/libpprofagent.so"
work=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
for b in "$bin" "$agent" "$build/test/programs/deep_spin" "$build/test/programs/heap_bench"; do
    [ -e "$b" ] || make -s "$b" >/dev/null
done
have_vg=0
command -v valgrind >/dev/null 2>&1 && have_vg=1
[ $have_vg = 1 ] || { echo "bench unwind: valgrind is not installed (the instruction counts are this area's measure)" >&2; exit 1; }

# callgrind_annotate run where no source file is found: in the source tree
# it splits a function's entries by path.
annotate() { (cd "$work" && callgrind_annotate --inclusive=yes --threshold=100 "$@" 2>/dev/null); }
# inclusive OUT FUNCTION: callgrind's inclusive count of FUNCTION.
inclusive() {
    annotate "$1" \
        | sed -n "s/^ *\([0-9,]*\) .*[:/]$2 .*/\1/p" | head -n 1 | tr -d ,
}
# calls OUT CALLER CALLEE: how many times CALLER called CALLEE.
calls() {
    annotate --tree=caller "$1" \
        | grep -B1 "\*  .*[:/]$3 " | sed -n "s/.*[:/]$2 (\([0-9,]*\)x).*/\1/p" | head -n 1 | tr -d ,
}

printf '| %-11s | %6s | %12s | %12s |\n' unwinder frames "instructions" "median ns"
printf '|%s|%s|%s|%s|\n' "-------------" "--------" "--------------" "--------------"
for depth in 0 12 16; do
    for who in walker libunwind libprofiler; do
        line=$("$bin" bench "$depth" "$who")
        case "$line" in *missing*) continue ;; esac
        frames=$(printf '%s\n' "$line" | sed -n 's/.*frames=\([0-9]*\).*/\1/p')
        ns=$(printf '%s\n' "$line" | sed -n 's/.*median_ns=\([0-9]*\).*/\1/p')
        ir=-
        if [ $have_vg = 1 ]; then
            valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
                "$bin" bench "$depth" "$who" >/dev/null 2>&1 || true
            total=$(inclusive "$work/cg.out" "bench_${who}_walks")
            walks=$(printf '%s\n' "$line" | sed -n 's/.*walks=\([0-9]*\).*/\1/p')
            [ -n "$total" ] && ir=$((total / walks))
        fi
        printf '| %-11s | %6s | %12s | %12s |\n' "$who" "$frames" "$ir" "$ns"
    done
done

if [ $have_vg = 1 ]; then
    echo
    mkdir -p "$work/dumps"
    LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_CPU_HZ=250 PPROF_DUMP_DIR="$work/dumps" \
        valgrind --tool=callgrind --callgrind-out-file="$work/cpu.out" \
        "$build/test/programs/deep_spin" 14 1500 >/dev/null 2>&1 || true
    h=$(inclusive "$work/cpu.out" cpu_signal_handler)
    u=$(inclusive "$work/cpu.out" stack_unwind_signal)
    n=$(calls "$work/cpu.out" cpu_signal_handler stack_unwind_signal)
    if [ -n "$h" ] && [ -n "$u" ] && [ -n "$n" ] && [ "$n" -gt 0 ]; then
        echo "CPU sample, 20 frames (deep_spin 14): $((h / n)) instructions in the handler, $((u / n)) of them the walk, per sample ($n samples)"
    else
        echo "bench: no measurement of the CPU sample's instructions (handler '$h', walk '$u', samples '$n')" >&2
        exit 1
    fi

    LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_LOG=quiet PPROF_START_DELAY_MS=0 PPROF_HEAP_RATE=1 \
        valgrind --tool=callgrind --callgrind-out-file="$work/heap.out" \
        "$build/test/programs/heap_bench" pairs 20000 >/dev/null 2>&1 || true
    c=$(inclusive "$work/heap.out" stack_capture_from)
    n=$(calls "$work/heap.out" heap_table_sample stack_capture_from)
    if [ -n "$c" ] && [ -n "$n" ] && [ "$n" -gt 0 ]; then
        echo "heap sample capture (heap_bench pairs, from the sampler's caller: 1 agent frame walked and dropped, 5 host frames kept): $((c / n)) instructions per capture ($n captures)"
    else
        echo "bench: no measurement of the heap sample's capture (instructions '$c', captures '$n')" >&2
        exit 1
    fi
fi

py=$(command -v python3 || true)
if [ -n "$py" ]; then
    for i in 1 2 3 4 5; do
        LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_LOG=debug PPROF_START_DELAY_MS=0 PPROF_HEAP_RATE=1 \
            "$py" -c 'import json, decimal, sqlite3
[json.dumps({"a": decimal.Decimal(i)}, default=str) for i in range(20000)]
sqlite3.connect(":memory:").execute("select 1")' 2>&1 \
            | awk '/unwind tables:/ { if ($4 + 0 <= last) us = 0
                                      last = $4; us += $(NF - 1); kib = $8; code = $11 }
                   END { printf "%d %d %d\n", us, kib, code }'
    done | sort -n > "$work/py"
    awk 'NR == 3 { printf "python3 (json, decimal, sqlite3): tables %d KiB for %d KiB of code = %d KiB per MiB of code; built in %.1f ms (median of 5)\n", $2, $3, $2 * 1024 / $3, $1 / 1000 }' "$work/py"
fi
