#!/bin/sh
# Heap profiler cost, side by side in one run: test/programs/heap_bench (a
# malloc-heavy workload on 4 threads: mostly small sizes, some large, a
# window of live objects) with no tool, under the agent at the default
# rate, and under the tools a user would otherwise use: jemalloc's profiler
# (against plain jemalloc), gperftools' heap profiler (against plain
# tcmalloc) and heaptrack (against plain glibc). Configurations are
# interleaved round by round; wall time and peak RSS are medians, shown as
# ratios to their baseline.
#
# Then deterministic instruction counts with valgrind --tool=callgrind:
# the instructions the agent adds per malloc+free pair (two loop lengths,
# so fixed start-up costs cancel), and the instruction ratio of the whole
# workload (agent vs glibc, jemalloc prof vs jemalloc).
#
#   sh test/bench/heap.sh BUILD_DIR     (HEAP_BENCH_OPS, HEAP_BENCH_ROUNDS)
set -eu
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
prog="$build/test/programs/heap_bench"
[ -x "$prog" ] || make -s -C "$top" BUILD="$build" "$prog" >/dev/null
agent="$build/libpprofagent.so"
je=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
tc=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4
threads=4
ops=${HEAP_BENCH_OPS:-2000000}
rounds=${HEAP_BENCH_ROUNDS:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/heapbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export PPROF_ADDR=off PPROF_LOG=quiet

# run NAME CMD...: one timed run; appends "NAME seconds maxrss_kb", the
# seconds as the workload measured them itself (start of its threads to
# their end, in microseconds), the peak RSS from /usr/bin/time.
run() {
    name=$1; shift
    /usr/bin/time -f "%M" -o "$tmp/rss" "$@" >"$tmp/out" 2>"$tmp/err" \
        || { cat "$tmp/err" >&2; echo "run $name failed" >&2; return; }
    secs=$(awk '/^heap_bench_elapsed / { print $2 }' "$tmp/out")
    echo "$name ${secs:-0} $(tail -n 1 "$tmp/rss")" >> "$tmp/results"
}

configs="glibc agent jemalloc jemalloc_prof tcmalloc gperftools_heap heaptrack"
for r in $(seq "$rounds"); do
    for c in $configs; do
        case $c in
        glibc) run $c "$prog" work $threads "$ops" ;;
        agent) run $c env LD_PRELOAD="$agent" "$prog" work $threads "$ops" ;;
        jemalloc) run $c env LD_PRELOAD="$je" "$prog" work $threads "$ops" ;;
        jemalloc_prof)
            run $c env LD_PRELOAD="$je" MALLOC_CONF=prof:true,lg_prof_sample:19,prof_prefix:"$tmp/jeprof" \
                "$prog" work $threads "$ops" ;;
        tcmalloc) run $c env LD_PRELOAD="$tc" "$prog" work $threads "$ops" ;;
        gperftools_heap)
            run $c env LD_PRELOAD="$tc" HEAPPROFILE="$tmp/gperf" "$prog" work $threads "$ops" ;;
        heaptrack) run $c heaptrack -o "$tmp/ht.$r" "$prog" work $threads "$ops" ;;
        esac
    done
done

median() { # NAME FIELD
    awk -v n="$1" -v f="$2" '$1 == n { print $f }' "$tmp/results" | sort -n \
        | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "heap_bench: $threads threads x $ops allocations, $rounds interleaved rounds, medians"
printf '%-16s %-10s %9s %9s %10s %9s\n' tool baseline wall_s ratio peak_MB ratio
for pair in "agent glibc" "jemalloc_prof jemalloc" "gperftools_heap tcmalloc" "heaptrack glibc" \
            "glibc glibc" "jemalloc jemalloc" "tcmalloc tcmalloc"; do
    set -- $pair
    w=$(median "$1" 2); bw=$(median "$2" 2)
    m=$(median "$1" 3); bm=$(median "$2" 3)
    awk -v t="$1" -v b="$2" -v w="$w" -v bw="$bw" -v m="$m" -v bm="$bm" 'BEGIN {
        printf "%-16s %-10s %9.3f %9.3f %10.1f %9.3f\n", t, b, w, (bw > 0 ? w / bw : 0), m / 1024, (bm > 0 ? m / bm : 0) }'
done

# ---- instructions (callgrind) ------------------------------------------------
if ! command -v valgrind >/dev/null; then
    echo "valgrind missing: no instruction counts"
    exit 0
fi
ir() { # PRELOAD CMD...: total instructions of a run (valgrind does not
       # follow env's exec, so the preload is set on valgrind itself)
    pre=$1; shift
    LD_PRELOAD="$pre" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$@" >/dev/null 2>"$tmp/cg.err" || true
    awk '/^(summary|totals):/ { print $2; exit }' "$tmp/cg.out"
}
n1=200000; n2=1000000
p1=$(ir "" "$prog" pairs $n1); p2=$(ir "" "$prog" pairs $n2)
a1=$(ir "$agent" "$prog" pairs $n1); a2=$(ir "$agent" "$prog" pairs $n2)
awk -v p1="$p1" -v p2="$p2" -v a1="$a1" -v a2="$a2" -v d="$((n2 - n1))" 'BEGIN {
    base = (p2 - p1) / d; with = (a2 - a1) / d
    printf "callgrind, malloc(64)+write+free loop: glibc %.1f instructions per pair, with the agent %.1f: +%.1f (ratio %.3f)\n",
        base, with, with - base, with / base }'
wops=200000
g=$(ir "" "$prog" work 2 $wops); a=$(ir "$agent" "$prog" work 2 $wops)
j=$(ir "$je" "$prog" work 2 $wops)
jp=$(MALLOC_CONF=prof:true,lg_prof_sample:19,prof_prefix:"$tmp/jeprof" ir "$je" "$prog" work 2 $wops)
awk -v g="$g" -v a="$a" -v j="$j" -v jp="$jp" 'BEGIN {
    printf "callgrind, whole workload (2 x 200000 allocations): agent/glibc %.4f, jemalloc prof/jemalloc %.4f\n", a / g, jp / j }'
