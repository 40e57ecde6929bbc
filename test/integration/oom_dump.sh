# The heap before the kill: test/programs/heap_grow grows its heap in a
# memory cgroup this test makes (64 MiB) until the kernel's out-of-memory
# killer ends it; with PPROF_DUMP_DIR the agent has written, before the
# kill, a heap profile that names grow_cache with most of the limit in
# use, the peak profile and the memory breakdown. cgroup v2 when the
# machine has its memory controller, else v1; neither: said, and skipped.
. "$TOP/test/integration/lib.sh"
note "go: $(command -v go) ($(go version))"
prog="$BUILD/test/programs/heap_grow"
limit=$((64 << 20))

# The settings are checked as the others: one line each, the default kept.
err=$(env LD_PRELOAD="$AGENT" PPROF_ADDR=off PPROF_MEMORY_DUMP_AT=95x \
    PPROF_MEMORY_DUMP_GAP=-3 PPROF_DEADLOCK_SECONDS=soon /bin/true 2>&1)
printf '%s\n' "$err"
expect_contains "$err" 'PPROF_MEMORY_DUMP_AT="95x" is not a percentage (1%-100%) or a size in bytes (K, M or G allowed); using 90%' "stderr"
expect_contains "$err" 'PPROF_MEMORY_DUMP_GAP="-3" is not an integer in [0, 86400]; using 60' "stderr"
expect_contains "$err" 'PPROF_DEADLOCK_SECONDS="soon" is not an integer in [0, 86400]; using 5' "stderr"
for good in 50% 100% 1 512K 64M 2G; do
    out=$(env LD_PRELOAD="$AGENT" PPROF_ADDR=off PPROF_MEMORY_DUMP_AT=$good /bin/true 2>&1)
    [ -z "$out" ] || fail "PPROF_MEMORY_DUMP_AT=$good refused: $out"
done
for bad in 0% 101% 12Q M -5 ''; do
    out=$(env LD_PRELOAD="$AGENT" PPROF_ADDR=off PPROF_MEMORY_DUMP_AT="$bad" /bin/true 2>&1)
    expect_contains "$out" "PPROF_MEMORY_DUMP_AT=\"$bad\" is not" "PPROF_MEMORY_DUMP_AT=$bad"
done

# A child cgroup of our own with the limit written: v2 needs the memory
# controller offered to children of our cgroup's parent folder.
cg=""
v2root=""
for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    [ -f "$r/cgroup.controllers" ] && grep -qw memory "$r/cgroup.controllers" && v2root=$r && break
done
if [ -n "$v2root" ]; then
    own=$(sed -n 's/^0:://p' /proc/self/cgroup)
    parent="$v2root${own%/*}"
    # Processes may not live in a folder whose children have controllers
    # (the v2 rule): make a sibling folder when our own has processes.
    if grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null ||
        echo +memory >"$parent/cgroup.subtree_control" 2>/dev/null; then
        cg="$parent/pprofagent-oom.$$"
        mkdir "$cg" && echo "$limit" >"$cg/memory.max" && echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
        [ -f "$cg/memory.max" ] && version=2 || cg=""
    fi
fi
if [ -z "$cg" ] && [ -d /sys/fs/cgroup/memory ]; then
    own=$(sed -n 's/^[0-9]*:\([^:]*,\)*memory\(,[^:]*\)*://p' /proc/self/cgroup)
    cg="/sys/fs/cgroup/memory$own/pprofagent-oom.$$"
    if mkdir "$cg" 2>/dev/null && echo "$limit" >"$cg/memory.limit_in_bytes"; then
        [ -f "$cg/memory.memsw.limit_in_bytes" ] && echo "$limit" >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null || true
        version=1
    else
        rmdir "$cg" 2>/dev/null || true
        cg=""
    fi
fi
if [ -z "$cg" ]; then
    note "no memory cgroup can be made here (neither v2 with its memory controller nor v1): skipped"
    echo ok
    exit 0
fi
trap 'cleanup; rmdir "$cg" 2>/dev/null || true' EXIT
note "cgroup v$version: $cg, limit $limit bytes"
[ "$version" = 1 ] && note "cgroup v2 has no memory controller on this machine: v1 tested"

# In the cgroup from its first instruction: a shell moves itself in, then
# execs the program under the agent. No server is needed.
dumps="$WORK/dumps"
sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
    env LD_PRELOAD="$AGENT" PPROF_ADDR=off PPROF_DUMP_DIR="$dumps" \
    PPROF_MEMORY_DUMP_AT=75% "$prog" >"$WORK/grow.out" 2>"$WORK/grow.err" &
PID=$!
PIDS="$PIDS $PID"
wait_exit "$PID" 60
cat "$WORK/grow.err"
note "heap_grow ended with status $STATUS"
[ "$STATUS" = 137 ] || fail "heap_grow was not killed by the kernel (status $STATUS)"

ls -l "$dumps"
heap=$(ls "$dumps"/*.heap.pb.gz 2>/dev/null | head -n 1)
[ -n "$heap" ] || fail "no heap profile was written before the kill"
ls "$dumps"/*.peak.pb.gz >/dev/null 2>&1 || fail "no peak profile"
ls "$dumps"/*.memory.json >/dev/null 2>&1 || fail "no memory breakdown"
summary=$(cat "$dumps"/*.memory.txt)
note "$summary"
usage=$(printf '%s\n' "$summary" | sed -n 's/^usage \([0-9]*\) bytes of the \([0-9]*\)-byte limit.*/\1 \2/p')
[ -n "$usage" ] || fail "the summary does not say the usage and the limit"
set -- $usage
[ "$2" = "$limit" ] || fail "the summary's limit is $2, not the cgroup's $limit"
[ "$1" -ge $((limit / 4 * 3)) ] || fail "the dump was written below the 75% mark ($1 bytes)"
expect_contains "$(cat "$WORK/grow.err")" "MiB limit in use" "the program's stderr"

# The heap profile names the growing site with most of the limit in use (the
# rest: the program's code, its libraries and the agent).
top=$(pprof -top -sample_index=inuse_space -unit=B "$heap")
printf '%s\n' "$top" | head -n 8
held=$(printf '%s\n' "$top" | awk '$NF == "grow_cache" {v = $4; sub(/B$/, "", v); print v + 0; exit}')
[ -n "$held" ] || fail "grow_cache is not in the heap profile"
awk -v h="$held" -v l="$limit" 'BEGIN {
    printf "# grow_cache holds %.1f MiB, %.0f%% of the %.0f MiB limit\n", h / 1048576, h / l * 100, l / 1048576
    exit !(h >= 0.5 * l) }' || fail "grow_cache holds less than half the limit in the dump"
echo ok
