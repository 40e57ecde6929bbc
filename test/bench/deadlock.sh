# Cost of the deadlock report's notes and of the watch (docs/deadlock.md):
# - callgrind instructions per note (deadlock_wait_begin, on the contended
#   path of the lock interposers only) in the contended-mutex workload, and
#   the instructions of a whole contended wait (mutex_lock_slow) they are
#   added to;
# - the watch thread's CPU time (pprof-watch, its own schedstat) with 100
#   mostly idle threads (idle_threads, each waking every 100-300 ms),
#   without PPROF_DUMP_DIR (one look a second) and with it (the memory
#   limit every 200 ms), beside the process's own CPU time over the same
#   window: the share is the watch's cost.
#
#   sh test/bench/deadlock.sh BUILD_DIR
#
# Environment: SECONDS_RUN (default 30).
set -eu
build=$(cd "${1:-build}" && pwd)
agent=${AGENT:-$build/libpprofagent.so}
top=$(cd "$(dirname "$0")/../.." && pwd)
cprog="$build/test/programs/contention_bench"
iprog="$build/test/programs/idle_threads"
secs=${SECONDS_RUN:-30}
for p in "$cprog" "$iprog"; do
    [ -x "$p" ] || make -s -C "$top" BUILD="$build" "$p" >/dev/null
done
[ -f "$agent" ] || { echo "deadlock bench: $agent is missing" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "deadlock bench: valgrind is missing" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# inclusive FUNCTION: "instructions calls" of FUNCTION in $tmp/cg.out.
inclusive() {
    callgrind_annotate --inclusive=yes "$tmp/cg.out" 2>/dev/null |
        awk -v f="$1" 'index($0, ":" f " (") && /=>/ {
            gsub(/,/, "", $1); n = $NF; gsub(/[()x]/, "", n); print $1, n; exit }'
}
env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet valgrind \
    --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$cprog" contended 4 20000 >/dev/null 2>&1
set -- $(inclusive deadlock_wait_begin) $(inclusive mutex_lock_slow)
[ $# = 4 ] && [ "$2" -gt 0 ] && [ "$4" -gt 0 ] ||
    { echo "deadlock bench: no contended wait measured" >&2; exit 1; }

# watch_cpu [ENV...]: "watch_us process_us" over $secs s of idle_threads.
watch_cpu() {
    env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet "$@" \
        "$iprog" 100 $((secs + 30)) 100 >/dev/null 2>&1 &
    pid=$!
    tid=""
    for i in $(seq 200); do
        tid=$(grep -ls '^pprof-watch$' /proc/$pid/task/*/comm | sed 's|.*/task/\([0-9]*\)/comm|\1|')
        [ -n "$tid" ] && break
        sleep 0.1
    done
    [ -n "$tid" ] || { kill $pid; echo "deadlock bench: no watch thread" >&2; exit 1; }
    w0=$(cut -d' ' -f1 /proc/$pid/task/$tid/schedstat)
    p0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    sleep "$secs"
    w1=$(cut -d' ' -f1 /proc/$pid/task/$tid/schedstat)
    p1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    kill $pid
    wait $pid 2>/dev/null || true
    echo $(((w1 - w0) / 1000)) $(((p1 - p0) * 1000000 / $(getconf CLK_TCK)))
}
set -- "$@" $(watch_cpu) $(watch_cpu PPROF_DUMP_DIR="$tmp/dumps")

echo "deadlock: notes on the contended path (callgrind); the watch over $secs s, load $(cut -d' ' -f1 /proc/loadavg) on $(nproc) CPUs"
echo
echo "| what | figure |"
echo "|---|---|"
awk -v i="$1" -v n="$2" -v wi="$3" -v wn="$4" 'BEGIN {
    printf "| a note (deadlock_wait_begin), instructions per contended wait | %.1f (%d waits) |\n", i / n, n
    printf "| a whole contended wait in the interposer (mutex_lock_slow), instructions | %.0f |\n", wi / wn }'
awk -v w="$5" -v p="$6" -v s="$secs" -v wd="$7" -v pd="$8" 'BEGIN {
    printf "| the watch, 100 idle threads, no dumps: CPU (share of the process, of a core) | %.1f ms (%.2f%%, %.4f%%) |\n", w / 1000, w / (p > 0 ? p : 1) * 100, w / (s * 1e6) * 100
    printf "| the same with PPROF_DUMP_DIR (the memory limit 5 times a second) | %.1f ms (%.2f%%, %.4f%%) |\n", wd / 1000, wd / (pd > 0 ? pd : 1) * 100, wd / (s * 1e6) * 100 }'
