# Profiles to files (PPROF_DUMP_DIR): a short batch job leaves a whole-run
# CPU profile and a heap profile when it returns from main and when it calls
# exit(); a dump signal writes more while it runs, an interval too; a signal
# the program handles itself is left to it; no temporary file stays behind.
. "$TOP/test/integration/lib.sh"
job="$BUILD/test/programs/batch_job"

# run_job NAME ENV... -- ARGS...: runs the job under the agent, serving
# nothing, with dumps into $WORK/NAME; checks its output and exit status.
run_job() {
    name=$1; shift
    envs=""
    while [ "$1" != -- ]; do envs="$envs $1"; shift; done
    shift
    mkdir -p "$WORK/$name"
    set +e
    # shellcheck disable=SC2086
    env LD_PRELOAD="$AGENT" PPROF_ADDR=off PPROF_DUMP_DIR="$WORK/$name" $envs \
        "$job" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
    status=$?
    set -e
}

# check_cpu FILE MS: the CPU profile names crunch with about MS of CPU.
check_cpu() {
    top=$(pprof -top "$1")
    printf '%s\n' "$top" | grep -E '^ +[0-9.]+(ms|s) +[0-9.]+% .* crunch$' >/dev/null \
        || { printf '%s\n' "$top"; fail "$1: crunch is not in the CPU profile"; }
    ms=$(printf '%s\n' "$top" | awk '$NF == "crunch" { v=$1; if (v ~ /ms$/) { sub(/ms$/, "", v) } else { sub(/s$/, "", v); v *= 1000 } print int(v) }')
    note "$1: crunch $ms ms of CPU (asked for $2 ms)"
    # The job measured its own CPU time; 100 Hz sampling of ~1 s of CPU is
    # within 25% of it (CPU time, not wall time).
    [ "$ms" -ge $(( $2 * 3 / 4 )) ] && [ "$ms" -le $(( $2 * 5 / 4 + 100 )) ] \
        || fail "$1: crunch has $ms ms, expected about $2"
}

# check_heap FILE: keep_blocks holds 8 MiB live, exactly (the return case
# records every allocation: PPROF_HEAP_RATE=1).
check_heap() {
    top=$(pprof -top -sample_index=inuse_space "$1")
    mb=$(printf '%s\n' "$top" | awk '$NF == "keep_blocks" { print $1 }')
    note "$1: keep_blocks $mb in use"
    [ "$mb" = 8MB ] || { printf '%s\n' "$top"; fail "$1: keep_blocks is not 8MB"; }
}

# 1. Return from main.
run_job ret PPROF_HEAP_RATE=1 -- return 1000
[ "$status" = 0 ] || fail "return: exit status $status"
[ "$(cat "$WORK/ret.out")" = done ] || fail "return: stdout changed"
set -- "$WORK"/ret/batch_job-*-*.cpu.pb.gz
[ $# = 1 ] && [ -f "$1" ] || { ls -la "$WORK/ret"; fail "return: expected one CPU profile"; }
case "$(basename "$1")" in
    batch_job-[0-9]*-[0-9][0-9][0-9][0-9][0-1][0-9][0-3][0-9]T[0-9][0-9][0-9][0-9][0-9][0-9].[0-9][0-9][0-9]Z.cpu.pb.gz) ;;
    *) fail "file name $(basename "$1") is not program-pid-UTC time" ;;
esac
check_cpu "$1" 1000
set -- "$WORK"/ret/batch_job-*.heap.pb.gz
[ $# = 1 ] && [ -f "$1" ] || fail "return: expected one heap profile"
check_heap "$1"

# 2. exit(3): same files, the exit status kept.
run_job exit -- exit 500
[ "$status" = 3 ] || fail "exit: exit status $status, expected 3"
set -- "$WORK"/exit/*.cpu.pb.gz
[ -f "$1" ] || fail "exit: no CPU profile"
check_cpu "$1" 500
set -- "$WORK"/exit/*.heap.pb.gz
[ -f "$1" ] || fail "exit: no heap profile"

# 3. On a signal, while it runs, and every interval.
mkdir -p "$WORK/sig"
env LD_PRELOAD="$AGENT" PPROF_ADDR=off PPROF_DUMP_DIR="$WORK/sig" \
    PPROF_DUMP_SIGNAL=USR1 PPROF_DUMP_INTERVAL=2 \
    "$job" wait 300 5 >"$WORK/sig.out" 2>"$WORK/sig.err" &
pid=$!
PIDS="$PIDS $pid"
# Wait until the job has burnt its CPU (its first interval dump shows it).
i=0
while [ "$(ls "$WORK/sig" | grep -c 'cpu.pb.gz$' || true)" = 0 ]; do
    i=$((i + 1)); [ $i -lt 100 ] || fail "no interval dump within 10 s"
    sleep 0.1
done
before=$(ls "$WORK/sig" | grep -c 'cpu.pb.gz$' || true)
kill -USR1 "$pid"
i=0
while [ "$(ls "$WORK/sig" | grep -c 'cpu.pb.gz$' || true)" -le "$before" ]; do
    i=$((i + 1)); [ $i -lt 50 ] || fail "no dump within 5 s of SIGUSR1"
    sleep 0.1
done
kill -0 "$pid" || fail "SIGUSR1 killed the job"
wait "$pid" || fail "the job failed after the dumps"
[ "$(cat "$WORK/sig.out")" = done ] || fail "signal: stdout changed"
n=$(ls "$WORK/sig" | grep -c 'cpu.pb.gz$')
# Interval dumps at 2 and 4 s, one on the signal, one at exit.
note "signal/interval run wrote $n CPU profiles"
[ "$n" -ge 3 ] || { ls -la "$WORK/sig"; fail "expected at least 3 CPU dumps, got $n"; }
! ls "$WORK/sig" | grep -q 'tmp' || { ls -la "$WORK/sig"; fail "a temporary file stayed behind"; }
# Every file is a whole profile, and the last one covers the whole run.
for f in "$WORK"/sig/*.pb.gz; do
    go tool pprof -raw "$f" >/dev/null 2>&1 || fail "$f is not a whole profile"
done
last=$(ls "$WORK"/sig/*.cpu.pb.gz | sort | tail -n 1)
check_cpu "$last" 300
dur=$(pprof -raw "$last" | awk '/^Duration:/ { print $2 }')
note "last CPU dump: Duration $dur"

# 4. A program that handles SIGUSR1 itself keeps it: its handler runs, no
#    dump is written on it (only the exit dump), one line says why.
mkdir -p "$WORK/own"
env LD_PRELOAD="$AGENT" PPROF_ADDR=off PPROF_DUMP_DIR="$WORK/own" \
    PPROF_DUMP_SIGNAL=USR1 "$job" own-usr1 100 3 >"$WORK/own.out" 2>"$WORK/own.err" &
pid=$!
PIDS="$PIDS $pid"
sleep 1.5
kill -USR1 "$pid"
wait "$pid" || fail "own-usr1 job failed"
grep -qx "usr1 1" "$WORK/own.out" || { cat "$WORK/own.out"; fail "the program's own SIGUSR1 handler did not run once"; }
n=$(ls "$WORK/own" | grep -c 'cpu.pb.gz$')
[ "$n" = 1 ] || { ls "$WORK/own"; fail "expected only the exit dump, got $n CPU files"; }
cat "$WORK/own.err"

# 5. A bad signal name: one line, no dumps on a signal, the job unharmed.
run_job bad PPROF_DUMP_SIGNAL=TERM -- return 100
[ "$status" = 0 ] || fail "bad signal: exit status $status"
grep -q 'PPROF_DUMP_SIGNAL="TERM" is not one of' "$WORK/bad.err" || { cat "$WORK/bad.err"; fail "bad signal message"; }
echo ok
