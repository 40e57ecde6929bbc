#!/bin/sh
# Operations cost, side by side in one run, interleaved, medians of
# OPS_BENCH_ROUNDS runs, as ratios to the program alone:
# - fork: a process forking children that _exit at once, and children that
#   exec /bin/true, alone / under the agent with PPROF_CHILDREN=off / under
#   the agent with forked children served (the default);
# - exit dumps: a batch job's CPU time, exit included, with and without
#   PPROF_DUMP_DIR (CPU profile of the run + heap profile at exit).
#
#   sh test/bench/ops.sh BUILD_DIR      (OPS_BENCH_ROUNDS=5, OPS_BENCH_FORKS=500)
set -eu
. "$(dirname "$0")/stats.sh"
bench_start "${1:-build}" test/programs/fork_bench test/programs/batch_job
forker="$build/test/programs/fork_bench"
job="$build/test/programs/batch_job"
rounds=${OPS_BENCH_ROUNDS:-5}
forks=${OPS_BENCH_FORKS:-500}

us_of() { sed -n 's/cpu_us=\([0-9.]*\).*/\1/p'; }

fork_alone() { "$forker" "$1" "$forks" | us_of; }
fork_off() {
    LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_CHILDREN=off \
        PPROF_RUN_DIR="$work/run" "$forker" "$1" "$forks" | us_of
}
fork_serve() {
    LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_RUN_DIR="$work/run" \
        "$forker" "$1" "$forks" | us_of
}
# CPU ms (user + system) of a whole run, exit included, from getrusage.
cpu_ms_of() {
    python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(int((r.ru_utime + r.ru_stime) * 1000))' "$@"
}
job_plain() {
    cpu_ms_of env LD_PRELOAD="$agent" PPROF_ADDR=off "$job" return 300
}
job_dump() {
    cpu_ms_of env LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_DUMP_DIR="$work/dumps" \
        "$job" return 300
}

for mode in exit exec; do
    : > "$work/$mode.alone"; : > "$work/$mode.off"; : > "$work/$mode.serve"
done
: > "$work/job.plain"; : > "$work/job.dump"
for r in $(seq "$rounds"); do
    for mode in exit exec; do
        fork_alone $mode >> "$work/$mode.alone"
        fork_off $mode >> "$work/$mode.off"
        fork_serve $mode >> "$work/$mode.serve"
    done
    job_plain >> "$work/job.plain"
    job_dump >> "$work/job.dump"
done
files=$(ls "$work/run" 2>/dev/null | wc -l)

echo "fork + wait, CPU microseconds per child, parent and child together (median of $rounds runs of $forks forks)"
printf '%-34s %10s %10s %10s\n' child alone children=off children=serve
for mode in exit exec; do
    a=$(median < "$work/$mode.alone")
    o=$(median < "$work/$mode.off")
    s=$(median < "$work/$mode.serve")
    label="_exit at once"
    [ $mode = exec ] && label="exec /bin/true"
    printf '%-34s %10s %10s %10s\n' "$label" "$a" "$o" "$s"
    awk -v a="$a" -v o="$o" -v s="$s" -v l="$label" \
        'BEGIN { printf "%-34s %10s %10.2f %10.2f\n", l " (ratio)", "1.00", o / a, s / a }'
done
echo "announcement files left by children that ended at once: $files"

# Instructions of the fork child handler (deterministic): callgrind counts a
# forked child's instructions from its parent's start, so the difference
# between the two policies' children is what the child handler adds.
if command -v valgrind >/dev/null 2>&1; then
    for policy in off serve; do
        mkdir -p "$work/cg.$policy"
        valgrind --tool=callgrind --trace-children=yes \
            --callgrind-out-file="$work/cg.$policy/out.%p" env LD_PRELOAD="$agent" \
            PPROF_ADDR=127.0.0.1:0 PPROF_CHILDREN=$policy PPROF_RUN_DIR="$work/cgrun" \
            "$forker" exit 20 >/dev/null 2>&1 || true
    done
    child_ir() { # median of the children's totals (every file but the parent's)
        for f in $(ls "$work/cg.$1"/out.* | sort -t. -k2 -n | tail -n +2); do
            sed -n 's/^summary: //p' "$f"
        done | median
    }
    o=$(child_ir off); s=$(child_ir serve)
    echo "callgrind, forked child that _exits at once: children=off $o instructions, children=serve $s (+$((s - o)) in the child handler)"
fi
p=$(median < "$work/job.plain")
d=$(median < "$work/job.dump")
echo "batch job (300 ms of CPU in crunch), CPU ms of the whole run: agent without dumps $p, with PPROF_DUMP_DIR $d (ratio $(awk -v p="$p" -v d="$d" 'BEGIN { printf "%.2f", d / p }'))"
