#!/bin/sh
# Wall profile cost with many mostly idle threads (test/programs/
# idle_threads: 1,000 threads waking every 100 to 300 ms for ~20 us of
# work, in condition variables, nanosleep, epoll_wait and poll):
# - the process's CPU time (every thread, the agent's included) over a
#   fixed wall time, without the agent, with the agent idle and with a wall
#   profile running at the default rate, in interleaved rounds: medians and
#   the spread (min..max), and the difference in ms of CPU per second;
# - the wall profile's own look time per tick and what its comment counts;
# - the answer time of /debug/pprof/goroutine (debug=2 and the proto) with
#   the same 1,000 threads (median of RUNS requests).
#
#   sh test/bench/wall.sh BUILD_DIR   (WALL_BENCH_ROUNDS=5 WALL_BENCH_SECONDS=10
#                                      WALL_BENCH_THREADS=1000 RUNS=9)
set -eu
build=$(cd "${1:-build}" && pwd)
agent="$build/libpprofagent.so"
prog="$build/test/programs/idle_threads"
rounds=${WALL_BENCH_ROUNDS:-5}
secs=${WALL_BENCH_SECONDS:-10}
threads=${WALL_BENCH_THREADS:-1000}
runs=${RUNS:-9}
work=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
[ -x "$prog" ] || make -s "$prog" >/dev/null

cpu_of() { sed -n 's/.*cpu_ms=\([0-9.]*\).*/\1/p'; }
median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
spread() { sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.0f..%.0f", lo, hi}'; }

run_alone() { "$prog" "$threads" "$secs" | cpu_of; }
run_idle() {
    LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet "$prog" "$threads" "$secs" | cpu_of
}
run_wall() {
    rm -f "$work/port" "$work/out"
    LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_START_DELAY_MS=0 PPROF_LOG=quiet \
        PPROF_PORT_FILE="$work/port" "$prog" "$threads" "$secs" > "$work/out" &
    pid=$!
    while [ ! -s "$work/port" ]; do sleep 0.01; done
    # Started before the threads are all up, so it covers the measured run.
    curl -s -o "$work/wall.pb.gz" "http://$(cat "$work/port")/debug/pprof/wall?seconds=$((secs + 3))" &
    c=$!
    wait "$pid"
    kill "$c" 2>/dev/null || true
    wait "$c" 2>/dev/null || true
    cpu_of < "$work/out"
}

for c in alone idle wall; do : > "$work/$c"; done
for r in $(seq "$rounds"); do
    for c in alone idle wall; do
        run_$c >> "$work/$c"
    done
done
base=$(median < "$work/alone")
echo "$threads mostly idle threads, $secs s of wall time; process CPU time, median (min..max) of $rounds interleaved rounds"
printf '| %-32s | %10s | %12s | %14s |\n' configuration "CPU ms" spread "vs alone, ms/s"
printf '|%s|%s|%s|%s|\n' "----------------------------------" "------------" "--------------" "----------------"
for c in alone idle wall; do
    case $c in
        alone) label="program alone" ;;
        idle) label="agent loaded, idle" ;;
        wall) label="agent, wall profile at 20 Hz" ;;
    esac
    m=$(median < "$work/$c")
    printf '| %-32s | %10.1f | %12s | %14.2f |\n' "$label" "$m" "$(spread < "$work/$c")" \
        "$(echo "$m $base $secs" | awk '{print ($1 - $2) / $3}')"
done

# One wall profile, run to its end: what it looked at and its own time.
rm -f "$work/port"
LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_START_DELAY_MS=0 PPROF_LOG=quiet \
    PPROF_PORT_FILE="$work/port" "$prog" "$threads" 60 > /dev/null &
pid=$!; pids="$pids $pid"
while [ ! -s "$work/port" ]; do sleep 0.01; done
addr=$(cat "$work/port")
sleep 2
curl -s -o "$work/w.pb.gz" "http://$addr/debug/pprof/wall?seconds=5"
echo
echo "A 5 s wall profile of the same program:"
PPROF_TMPDIR="$work/pp" go tool pprof -raw "$work/w.pb.gz" 2>/dev/null | sed -n 's/^Comment: /  /p'

# The threads dump with the same threads.
gtime() { curl -s -o /dev/null -w '%{time_total}\n' "http://$addr/debug/pprof/$1"; }
gtime 'goroutine?debug=2' > /dev/null # symbols loaded once
: > "$work/g2"; : > "$work/g0"
for i in $(seq "$runs"); do
    gtime 'goroutine?debug=2' >> "$work/g2"
    gtime goroutine >> "$work/g0"
done
echo
echo "goroutine endpoint with $threads threads, median (min..max) of $runs requests:"
echo "  debug=2: $(median < "$work/g2" | awk '{printf "%.0f ms", $1 * 1000}') ($(awk '{print $1 * 1000}' "$work/g2" | spread) ms)"
echo "  proto:   $(median < "$work/g0" | awk '{printf "%.0f ms", $1 * 1000}') ($(awk '{print $1 * 1000}' "$work/g0" | spread) ms)"
kill "$pid" 2>/dev/null || true
