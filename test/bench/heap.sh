#!/bin/sh
# Heap profiler cost, side by side in one run: test/programs/heap_bench (a
# malloc-heavy workload on 4 threads: mostly small sizes, some large, a
# window of live objects) with no tool, under the agent at the default
# rate, under a forwarding-only interposer (test/bench/forward_shim.c: the
# same functions interposed, each a jump to the next allocator, the floor
# any interposer pays), and under the tools a user would otherwise use:
# jemalloc's profiler (against plain jemalloc), tcmalloc's own sampler at
# the same mean distance, 512 KiB (TCMALLOC_SAMPLE_PARAMETER, the closest
# peer: sampled stacks kept for the heap profile, nothing else),
# gperftools' heap profiler (against plain tcmalloc) and heaptrack
# (against plain glibc).
# The agent runs three ways: as a service starts (the workload is over
# before PPROF_START_DELAY_MS: its first samples are walked without the
# unwind tables, which wait for the delay or until those walks have cost
# about what building them does), with its tables built
# (PPROF_START_DELAY_MS=0 builds them in the constructor, before the
# workload's clock starts: a process that has lived the delay), and with
# PPROF_HEAP_RATE=0 (the fast paths run, nothing is ever sampled).
# Configurations are interleaved round by round; wall time, CPU time (of
# the workload's threads, as the program measures it: on a shared machine
# other work moves it much less than the wall time) and peak RSS are
# medians, shown as ratios to their baseline, with the range of the
# per-round ratio. The noise of the run is the spread of each baseline's
# own wall and CPU times over the rounds ((max - min) / median).
#
# Then deterministic instruction counts with valgrind --tool=callgrind:
# the instructions per malloc+free pair of heap_bench's pairs loop (the
# loop alone, --toggle-collect; the agent with its unwind tables built, as
# in a process that has run a second), each tool against its allocator,
# and the instruction ratio of the whole workload.
#
#   sh test/bench/heap.sh BUILD_DIR     (HEAP_BENCH_OPS, HEAP_BENCH_ROUNDS,
#       HEAP_BENCH_CONFIGS: a subset of the configurations below, e.g.
#       "glibc shim agent_rate0 agent_tables agent";
#       HEAP_BENCH_CALLGRIND=0 skips the counts)
set -eu
build=$(cd "${1:-build}" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
prog="$build/test/programs/heap_bench"
shim="$build/test/bench/libforward_shim.so"
for f in "$prog" "$shim"; do
    [ -e "$f" ] || make -s -C "$top" BUILD="$build" "$f" >/dev/null
done
agent="$build/libpprofagent.so"
je=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
tc=/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4
threads=4
ops=${HEAP_BENCH_OPS:-2000000}
rounds=${HEAP_BENCH_ROUNDS:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/heapbench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export PPROF_ADDR=off PPROF_LOG=quiet

# run NAME CMD...: one timed run; appends "NAME seconds maxrss_kb round
# cpu_seconds", the seconds as the workload measured them itself (start of
# its threads to their end, in microseconds, and the CPU time its threads
# used meanwhile), the peak RSS from /usr/bin/time.
run() {
    name=$1; shift
    /usr/bin/time -f "%M" -o "$tmp/rss" "$@" >"$tmp/out" 2>"$tmp/err" \
        || { cat "$tmp/err" >&2; echo "run $name failed" >&2; return; }
    secs=$(awk '/^heap_bench_elapsed / { print $2 }' "$tmp/out")
    cpu=$(awk '/^heap_bench_cpu / { print $2 }' "$tmp/out")
    echo "$name ${secs:-0} $(tail -n 1 "$tmp/rss") $r ${cpu:-0}" >> "$tmp/results"
}

configs=${HEAP_BENCH_CONFIGS:-"glibc shim agent_rate0 agent_tables agent jemalloc jemalloc_prof tcmalloc tcmalloc_sample gperftools_heap heaptrack"}
for r in $(seq "$rounds"); do
    for c in $configs; do
        case $c in
        glibc) run $c "$prog" work $threads "$ops" ;;
        shim) run $c env LD_PRELOAD="$shim" "$prog" work $threads "$ops" ;;
        agent) run $c env LD_PRELOAD="$agent" "$prog" work $threads "$ops" ;;
        agent_tables)
            run $c env LD_PRELOAD="$agent" PPROF_START_DELAY_MS=0 "$prog" work $threads "$ops" ;;
        agent_rate0)
            run $c env LD_PRELOAD="$agent" PPROF_HEAP_RATE=0 PPROF_START_DELAY_MS=0 "$prog" work $threads "$ops" ;;
        jemalloc) run $c env LD_PRELOAD="$je" "$prog" work $threads "$ops" ;;
        jemalloc_prof)
            run $c env LD_PRELOAD="$je" MALLOC_CONF=prof:true,lg_prof_sample:19,prof_prefix:"$tmp/jeprof" \
                "$prog" work $threads "$ops" ;;
        tcmalloc) run $c env LD_PRELOAD="$tc" "$prog" work $threads "$ops" ;;
        tcmalloc_sample)
            run $c env LD_PRELOAD="$tc" TCMALLOC_SAMPLE_PARAMETER=524288 "$prog" work $threads "$ops" ;;
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

# range NAME BASE FIELD: min and max over the rounds of NAME's FIELD (2
# wall, 5 CPU) / BASE's.
range() {
    awk -v n="$1" -v b="$2" -v f="$3" '$1 == n { t[$4] = $f } $1 == b { u[$4] = $f }
        END { lo = 0; hi = 0
              for (r in t) if (u[r] > 0) { x = t[r] / u[r]; if (lo == 0 || x < lo) lo = x; if (x > hi) hi = x }
              printf "%.3f-%.3f", lo, hi }' "$tmp/results"
}
# spread NAME FIELD: (max - min) / median of NAME's FIELD (2 wall, 5 CPU)
# over the rounds.
spread() {
    awk -v n="$1" -v f="$2" '$1 == n { print $f }' "$tmp/results" | sort -n |
        awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                                 printf "%.3f", (m > 0 ? (v[NR] - v[1]) / m : 0) }'
}

echo "heap_bench: $threads threads x $ops allocations, $rounds interleaved rounds, medians"
printf '%-16s %-10s %7s %6s %11s %6s %6s %11s %7s %6s\n' tool baseline wall_s ratio range cpu_s ratio range peak_MB ratio
for pair in "shim glibc" "agent_rate0 glibc" "agent_tables glibc" "agent glibc" \
            "agent_rate0 shim" "agent_tables shim" "agent shim" "tcmalloc_sample tcmalloc" \
            "jemalloc_prof jemalloc" "gperftools_heap tcmalloc" "heaptrack glibc"; do
    set -- $pair
    case " $configs " in *" $1 "*) ;; *) continue ;; esac
    case " $configs " in *" $2 "*) ;; *) continue ;; esac
    w=$(median "$1" 2); bw=$(median "$2" 2)
    c=$(median "$1" 5); bc=$(median "$2" 5)
    m=$(median "$1" 3); bm=$(median "$2" 3)
    awk -v t="$1" -v b="$2" -v w="$w" -v bw="$bw" -v c="$c" -v bc="$bc" -v m="$m" -v bm="$bm" \
        -v rw="$(range "$1" "$2" 2)" -v rc="$(range "$1" "$2" 5)" 'BEGIN {
        printf "%-16s %-10s %7.3f %6.3f %11s %6.3f %6.3f %11s %7.1f %6.3f\n", t, b, w, (bw > 0 ? w / bw : 0), rw,
            c, (bc > 0 ? c / bc : 0), rc, m / 1024, (bm > 0 ? m / bm : 0) }'
done
noise=
for b in glibc shim jemalloc tcmalloc; do
    case " $configs " in *" $b "*) noise="$noise${noise:+, }$b $(spread $b 2) / $(spread $b 5)" ;; esac
done
echo "noise, each baseline's wall / CPU time over the rounds, (max - min) / median: $noise"
[ "${HEAP_BENCH_CALLGRIND:-1}" != 0 ] || exit 0

# ---- instructions (callgrind) ------------------------------------------------
if ! command -v valgrind >/dev/null; then
    echo "valgrind missing: no instruction counts"
    exit 0
fi
ir() { # PRELOAD CMD...: total instructions of a run (valgrind does not
       # follow env's exec, so the preload is set on valgrind itself)
    pre=$1; shift
    LD_PRELOAD="$pre" valgrind --tool=callgrind \
        --callgrind-out-file="$tmp/cg.out" "$@" >/dev/null 2>"$tmp/cg.err" || true
    awk '/^(summary|totals):/ { print $2; exit }' "$tmp/cg.out"
}
# pair PRELOAD: instructions per pair of the pairs loop alone.
np=1000000
pair() {
    awk -v i="$(PPROF_START_DELAY_MS=0 ir "$1" --toggle-collect=pairs "$prog" pairs $np)" -v n=$np 'BEGIN { printf "%.2f", i / n }'
}
g=$(pair ""); a=$(pair "$agent"); s=$(pair "$shim")
t=$(pair "$tc"); ts=$(TCMALLOC_SAMPLE_PARAMETER=524288 pair "$tc")
j=$(pair "$je"); jp=$(MALLOC_CONF=prof:true,lg_prof_sample:19,prof_prefix:"$tmp/jeprof" pair "$je")
echo "callgrind, malloc(64)+write+free loop ($np pairs), instructions per pair:"
printf '%-16s %-10s %9s %9s %9s\n' tool baseline base with added
for row in "shim glibc $g $s" "agent glibc $g $a" "agent shim $s $a" "tcmalloc_sample tcmalloc $t $ts" "jemalloc_prof jemalloc $j $jp"; do
    set -- $row
    awk -v t="$1" -v b="$2" -v x="$3" -v y="$4" 'BEGIN { printf "%-16s %-10s %9.2f %9.2f %+9.2f\n", t, b, x, y, y - x }'
done
wops=200000
g=$(ir "" "$prog" work 2 $wops); a=$(ir "$agent" "$prog" work 2 $wops)
s=$(ir "$shim" "$prog" work 2 $wops)
j=$(ir "$je" "$prog" work 2 $wops)
jp=$(MALLOC_CONF=prof:true,lg_prof_sample:19,prof_prefix:"$tmp/jeprof" ir "$je" "$prog" work 2 $wops)
t=$(ir "$tc" "$prog" work 2 $wops); ts=$(TCMALLOC_SAMPLE_PARAMETER=524288 ir "$tc" "$prog" work 2 $wops)
awk -v g="$g" -v a="$a" -v s="$s" -v j="$j" -v jp="$jp" -v t="$t" -v ts="$ts" 'BEGIN {
    printf "callgrind, whole workload (2 x 200000 allocations): shim/glibc %.4f, agent/glibc %.4f, tcmalloc sample/tcmalloc %.4f, jemalloc prof/jemalloc %.4f\n", s / g, a / g, ts / t, jp / j }'
