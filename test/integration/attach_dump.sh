# pprof-attach with PPROF_DUMP_DIR (docs/attach.md): dumps start after an
# attach as they do preloaded, from the attach command's environment.
#
# 1. cpu_burn, started without the agent, attached with PPROF_DUMP_SIGNAL=USR2
#    (at its default action in the program): the signal writes a CPU
#    profile that go tool pprof reads, whose split between hot_a and hot_b
#    is the program's own (its CPU clocks, over the window from before the
#    attach to after the dump) and whose CPU is no more than the program
#    used meanwhile; the detach writes the last dump, joins the agent's
#    threads, and gives the signal back: no longer caught (/proc), and
#    SIGUSR2 then does what it did before the attach, the default action,
#    ending the program.
# 2. Attached again with PPROF_DUMP_SIGNAL=USR1, which the program handles:
#    the signal is left to it (one line), its handler still answers, no
#    dump is written on it; the detach writes this attach's one dump, in
#    this attach's folder. Attached a third time without PPROF_DUMP_DIR:
#    no dumps (the settings are this attach's, not the last one's).
# 3. A program attached with PPROF_DUMP_DIR that returns from main while
#    attached writes the exit dump, and exits 0.
# 4. Two threads attach_late deadlocks after an attach with PPROF_DUMP_DIR:
#    the watch writes the cycle's report, naming the functions they wait
#    in, and a threads dump.
# 5. A child a program forks while attached with PPROF_DUMP_SIGNAL=USR2
#    starts no dumps (its fork is not one of the doors): SIGUSR2 ends it
#    by its default action, as the host had it.
. "$TOP/test/integration/lib.sh"

ATTACH="$BUILD/pprof-attach"
[ -x "$ATTACH" ] || fail "no $ATTACH (make test-bins builds it)"

# The third case's program, started first: it lives 12 s.
"$BUILD/test/programs/cpu_burn" 1 12 >"$WORK/short.out" 2>"$WORK/short.err" &
SHORT=$!
PIDS="$PIDS $SHORT"
"$BUILD/test/programs/cpu_burn" 2 600 >"$WORK/burn.out" 2>"$WORK/burn.err" &
PID=$!
PIDS="$PIDS $PID"
wait_until "cpu_burn to start" grep -q '^started' "$WORK/burn.out"
wait_until "the short cpu_burn to start" grep -q '^started' "$WORK/short.out"

# caught SIG: 1 when the program has a handler on signal number SIG (/proc).
caught() {
    mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$PID/status")
    echo $(( (0x$mask >> ($1 - 1)) & 1 ))
}
# cpu_files DIR: how many CPU dumps DIR holds.
cpu_files() {
    ls "$1" 2>/dev/null | grep -c '\.cpu\.pb\.gz$' || true
}
# cpu_files_at_least DIR N: DIR holds N CPU dumps or more.
cpu_files_at_least() {
    [ "$(cpu_files "$1")" -ge "$2" ]
}
# agent_threads: the agent's threads in the program, one name a line.
agent_threads() {
    cat /proc/"$PID"/task/*/comm | grep '^civetweb-\|^pprof' || true
}

# --- 3, attached now: its exit while attached writes the exit dump ---
mkdir -p "$WORK/exit"
PPROF_ADDR=off PPROF_DUMP_DIR="$WORK/exit" "$ATTACH" "$SHORT" 2>"$WORK/short.attach" ||
    { cat "$WORK/short.attach" >&2; fail "pprof-attach $SHORT failed"; }

# --- 1. the dump signal after the attach ---
[ "$(caught 12)" = 0 ] || fail "cpu_burn catches SIGUSR2 before the attach"
set -- $(host_figures burn a)
a0=$1 b0=$2
mkdir -p "$WORK/d1"
PPROF_ADDR=off PPROF_DUMP_DIR="$WORK/d1" PPROF_DUMP_SIGNAL=USR2 "$ATTACH" "$PID" 2>"$WORK/attach.err" ||
    { cat "$WORK/attach.err" >&2; fail "pprof-attach $PID failed"; }
cat "$WORK/attach.err"
[ "$(caught 12)" = 1 ] || fail "SIGUSR2 is not caught after the attach with PPROF_DUMP_SIGNAL=USR2"
# At least 3 s of the burners' CPU in the window (a loaded machine gives
# them less than the wall time).
end=$(($(date +%s) + 120))
while :; do
    set -- $(host_figures burn a)
    [ $(($1 + $2 - a0 - b0)) -ge 3000000000 ] && break
    [ "$(date +%s)" -le "$end" ] || fail "the burners used less than 3 s of CPU in 2 minutes"
    sleep 0.5
done
kill -USR2 "$PID"
wait_until "a CPU dump after SIGUSR2" cpu_files_at_least "$WORK/d1" 1
set -- $(host_figures burn a)
a1=$1 b1=$2
dump=$(ls "$WORK"/d1/*.cpu.pb.gz | head -n 1)
note "dump on SIGUSR2: $(basename "$dump")"
for f in "$WORK"/d1/*.pb.gz; do
    pprof -raw "$f" >/dev/null
done
top=$(pprof -top -cum -sample_index=samples "$dump")
na=$(top_cum "$top" hot_a)
nb=$(top_cum "$top" hot_b)
ms=$(top_cum "$(pprof -top -cum -unit=ms -sample_index=cpu "$dump")" burner)
note "hot_a / hot_b: the program measured $((a1 - a0)) / $((b1 - b0)) ns over the window, the dump has $na / $nb samples, $ms ms under burner"
awk -v a=$((a1 - a0)) -v b=$((b1 - b0)) -v na="$na" -v nb="$nb" 'BEGIN {
    if (na + nb < 100 || nb <= 0 || b <= 0) exit 1
    d = (na / nb) / (a / b) - 1; if (d < 0) d = -d
    exit !(d < 3 * sqrt(1 / na + 1 / nb) + 0.03)}' ||
    fail "the dumped CPU is not split as the program measured (or fewer than 100 samples)"
awk -v ms="$ms" -v t=$((a1 + b1 - a0 - b0)) 'BEGIN { exit !(ms > 0 && ms * 1e6 <= t * 1.05 + 2e7) }' ||
    fail "the dump has $ms ms of the burners' CPU, more than the $((a1 + b1 - a0 - b0)) ns they used from before the attach to after the dump"

# --- the detach: the last dump, no thread, the signal given back ---
"$ATTACH" --detach "$PID" 2>"$WORK/detach.err" ||
    { cat "$WORK/detach.err" >&2; fail "pprof-attach --detach failed"; }
cat "$WORK/detach.err"
[ "$(cpu_files "$WORK/d1")" = 2 ] || { ls "$WORK/d1"; fail "the detach did not write the last CPU dump"; }
[ -z "$(agent_threads)" ] || fail "threads of the agent left after the detach: $(agent_threads)"
[ "$(caught 12)" = 0 ] || fail "SIGUSR2 is still caught after the detach"
! ls "$WORK/d1" | grep -q tmp || fail "a temporary file stayed behind"

# --- 2. attached again: a signal the program handles is left to it ---
n=$(grep -c '^a=' "$WORK/burn.out")
mkdir -p "$WORK/d2"
PPROF_ADDR=off PPROF_DUMP_DIR="$WORK/d2" PPROF_DUMP_SIGNAL=USR1 "$ATTACH" "$PID" 2>"$WORK/attach2.err" ||
    { cat "$WORK/attach2.err" >&2; fail "the second pprof-attach failed"; }
wait_until "the line about SIGUSR1" grep -q 'PPROF_DUMP_SIGNAL: the program already handles or ignores signal 10' "$WORK/burn.err"
host_figures burn a >/dev/null
[ "$(grep -c '^a=' "$WORK/burn.out")" -gt "$n" ] || fail "the program's SIGUSR1 handler did not answer while attached"
"$ATTACH" --detach "$PID" 2>"$WORK/detach2.err" ||
    { cat "$WORK/detach2.err" >&2; fail "the second detach failed"; }
[ "$(cpu_files "$WORK/d2")" = 1 ] || { ls "$WORK/d2"; fail "the second attach's folder holds $(cpu_files "$WORK/d2") CPU dumps, not the detach's one"; }
[ "$(cpu_files "$WORK/d1")" = 2 ] || fail "the second attach wrote into the first one's folder"
n=$(grep -c '^a=' "$WORK/burn.out")
host_figures burn a >/dev/null
[ "$(grep -c '^a=' "$WORK/burn.out")" -gt "$n" ] || fail "the program's SIGUSR1 handler did not answer after the detach"
[ -z "$(agent_threads)" ] || fail "threads of the agent left after the second detach: $(agent_threads)"
grep 'pprofagent' "$WORK/burn.err" | sed 's/^/# /'
# The program's threads never block the profiling signal: a thread said to
# would be one of the agent's taken for the host's.
! grep 'threads block signal' "$WORK/burn.err" || fail "a thread counted as blocking the profiling signal"

# --- 3. the exit while attached ---
wait_exit "$SHORT" 60
[ "$STATUS" = 0 ] || fail "the short cpu_burn exited with $STATUS"
[ "$(cpu_files "$WORK/exit")" = 1 ] || { ls "$WORK/exit"; fail "no exit dump of the program that ended attached"; }
top=$(pprof -top -cum -sample_index=samples "$WORK"/exit/*.cpu.pb.gz)
[ "$(top_cum "$top" hot_a)" -gt 0 ] || fail "the exit dump has no hot_a"
note "exit while attached: $(ls "$WORK/exit" | tr '\n' ' ')"

# --- 4. a deadlock after the attach: its report in PPROF_DUMP_DIR ---
ASK="$WORK/ask"
mkdir -p "$ASK" "$WORK/dl"
"$BUILD/test/programs/attach_late" "$ASK" "$BUILD/test/programs/libattach_plugin.so" \
    >"$WORK/late.out" 2>"$WORK/late.err" &
LATE=$!
PIDS="$PIDS $LATE"
wait_until "attach_late to start" grep -q started "$WORK/late.out"
PPROF_ADDR=off PPROF_DUMP_DIR="$WORK/dl" PPROF_DEADLOCK_SECONDS=1 "$ATTACH" "$LATE" 2>"$WORK/late.attach" ||
    { cat "$WORK/late.attach" >&2; fail "pprof-attach $LATE failed"; }
touch "$ASK/deadlock"
wait_until "the lockers" grep -q '^lockers ' "$WORK/late.out"
has_report() { ls "$WORK/dl" | grep -q '\.threads\.txt$'; }
wait_until "the deadlock's report in PPROF_DUMP_DIR" has_report
report=$(cat "$WORK"/dl/*.deadlock.txt)
for f in take_ab take_ba locker-a locker-b; do
    expect_contains "$report" "$f" "the deadlock report written after the attach"
done
expect_contains "$(cat "$WORK"/dl/*.threads.txt)" "take_ab" "the threads dump written with it"
note "deadlock after the attach: $(ls "$WORK/dl" | tr '\n' ' ')"
"$ATTACH" --detach "$LATE" 2>/dev/null || fail "the detach from attach_late failed"
touch "$ASK/stop"
wait_exit "$LATE" 60
[ "$STATUS" = 0 ] || fail "attach_late exited with $STATUS"

# --- attached without PPROF_DUMP_DIR: no dumps, whatever the last attach had ---
PPROF_ADDR=off "$ATTACH" "$PID" 2>"$WORK/attach3.err" ||
    { cat "$WORK/attach3.err" >&2; fail "the attach without PPROF_DUMP_DIR failed"; }
cat /proc/"$PID"/task/*/comm | grep -q '^pprof-dump' && fail "a dump thread after an attach without PPROF_DUMP_DIR"
[ "$(caught 12)" = 0 ] || fail "SIGUSR2 caught after an attach without PPROF_DUMP_SIGNAL"
"$ATTACH" --detach "$PID" 2>/dev/null || fail "the third detach failed"
[ "$(cpu_files "$WORK/d2")" = 1 ] || fail "an attach without PPROF_DUMP_DIR wrote into the last one's folder"

# --- 5. a child the attached program forks: the signal as the host had it ---
cat >"$WORK/forker.py" <<'PY'
import os, sys, time
print("started", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
pid = os.fork()
if pid == 0:
    time.sleep(120)
    os._exit(0)
print("child", pid, flush=True)
_, status = os.waitpid(pid, 0)
print("child status", status, flush=True)
time.sleep(120)
PY
python3 "$WORK/forker.py" "$WORK/fork-now" >"$WORK/forker.out" 2>"$WORK/forker.err" &
FORKER=$!
PIDS="$PIDS $FORKER"
wait_until "the forker to start" grep -q '^started' "$WORK/forker.out"
mkdir -p "$WORK/d5"
PPROF_ADDR=off PPROF_DUMP_DIR="$WORK/d5" PPROF_DUMP_SIGNAL=USR2 "$ATTACH" "$FORKER" 2>"$WORK/forker.attach" ||
    { cat "$WORK/forker.attach" >&2; fail "pprof-attach $FORKER failed"; }
touch "$WORK/fork-now"
wait_until "the forker's child" grep -q '^child [0-9]' "$WORK/forker.out"
child=$(sed -n 's/^child \([0-9]*\)$/\1/p' "$WORK/forker.out")
PIDS="$PIDS $child"
kill -USR2 "$child"
wait_until "the child's end" grep -q '^child status' "$WORK/forker.out"
status=$(sed -n 's/^child status //p' "$WORK/forker.out")
[ "$status" = 12 ] || fail "the child forked while attached ended with wait status $status, not by SIGUSR2's default action (12)"
note "SIGUSR2 to a child forked while attached: its default action (wait status $status)"
"$ATTACH" --detach "$FORKER" 2>/dev/null || fail "the detach from the forker failed"

# --- SIGUSR2 after the detaches: its default action, as before the attach ---
kill -USR2 "$PID"
wait_exit "$PID" 30
[ "$STATUS" = $((128 + 12)) ] || fail "SIGUSR2 after the detach: exit status $STATUS, not the default action's 140"
note "SIGUSR2 after the detach ended the program (status $STATUS), as before the attach"
echo PASS
