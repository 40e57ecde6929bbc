# Deadlocks and stuck threads (test/programs/deadlock_pair): two threads
# that took two mutexes in opposite orders; a mutex, an rwlock (held for
# writing) and a PI futex (syscall()) waited for behind a holder blocked in
# read(); and two healthy workers sharing a mutex a millisecond
# at a time. /debug/pprof/deadlock lists exactly the cycle and the stuck
# chain, with thread names and the functions they wait in, never the
# workers; go tool pprof reads the debug=0 profile and its labels; the
# watch says the cycle once on stderr and writes the report and a threads
# dump to PPROF_DUMP_DIR.
. "$TOP/test/integration/lib.sh"
note "go: $(command -v go) ($(go version))"
prog="$BUILD/test/programs/deadlock_pair"

dumps="$WORK/dumps"
PPROF_DEADLOCK_SECONDS=1 PPROF_DUMP_DIR="$dumps" start_agent pair "$prog"
for i in $(seq 200); do grep -q '^started' "$WORK/pair.out" && break; sleep 0.05; done

# Waits of a second and more: wait until both groups are there.
report=""
for i in $(seq 200); do
    report=$(fetch "debug/pprof/deadlock?debug=1&min_seconds=1")
    case "$report" in *"cycle 1:"*"chain 1:"*) break ;; esac
    sleep 0.1
done
printf '%s\n' "$report"
expect_contains "$report" "deadlock profile: 1 cycle, 1 stuck chain" "the report"
cycle=$(printf '%s\n' "$report" | sed -n '/^cycle 1:/,/^chain 1:/p' | grep '^thread')
chain=$(printf '%s\n' "$report" | sed -n '/^chain 1:/,$p' | grep '^thread')
expect_contains "$cycle" "thread \"locker-a\"" "the cycle"
expect_contains "$cycle" "thread \"locker-b\"" "the cycle"
expect_contains "$cycle" "in take_ab for mutex" "the cycle"
expect_contains "$cycle" "in take_ba for mutex" "the cycle"
[ "$(printf '%s\n' "$cycle" | wc -l)" = 2 ] || fail "the cycle is not two threads"
a=$(printf '%s\n' "$cycle" | sed -n 's/^thread "locker-a" (\([0-9]*\)).*/\1/p')
b=$(printf '%s\n' "$cycle" | sed -n 's/^thread "locker-b" (\([0-9]*\)).*/\1/p')
expect_contains "$cycle" "take_ab for mutex 0x" "the cycle"
expect_contains "$(printf '%s\n' "$cycle" | grep locker-a)" "held by \"locker-b\" ($b)" "locker-a's line"
expect_contains "$(printf '%s\n' "$cycle" | grep locker-b)" "held by \"locker-a\" ($a)" "locker-b's line"
expect_contains "$chain" "thread \"waiter\"" "the chain"
expect_contains "$chain" "in wait_behind_reader for mutex" "the chain"
expect_contains "$chain" "held by \"reader\"" "the chain"
expect_contains "$chain" "thread \"reader\"" "the chain"
expect_contains "$chain" "thread \"rw-waiter\"" "the chain"
expect_contains "$chain" "in read_behind_reader for rwlock" "the chain"
expect_contains "$(printf '%s\n' "$chain" | grep rw-waiter)" "held by \"reader\"" "the rwlock waiter's line"
expect_contains "$chain" "in read, in hold_and_read" "the chain's holder"
expect_contains "$chain" "thread \"pi-waiter\"" "the chain"
expect_contains "$chain" "in lock_pi_behind_reader for PI futex" "the chain"
expect_contains "$(printf '%s\n' "$chain" | grep pi-waiter)" "held by \"reader\"" "the PI futex waiter's line"
[ "$(printf '%s\n' "$chain" | wc -l)" = 4 ] || fail "the chain is not four threads"
expect_contains "$report" "hold_and_read+" "the holder's stack"
expect_not_contains "$report" "worker" "the report"
expect_not_contains "$report" "healthy_work" "the report"

# The healthy workers do wait for each other, briefly: with no threshold
# they may show only as waiters whose holder runs or naps, never in a group;
# with a threshold above every wait so far, nothing is listed.
expect_contains "$(fetch 'debug/pprof/deadlock?debug=1&min_seconds=100000')" \
    "deadlock profile: 0 cycles, 0 stuck chains" "a report of long waits only"
[ "$(http_status 'debug/pprof/deadlock?min_seconds=x')" = 400 ] || fail "a bad min_seconds is not 400"

# debug=0: go tool pprof reads it with its labels.
fetch "debug/pprof/deadlock?min_seconds=1" >"$WORK/deadlock.pb.gz"
tags=$(pprof -tags "$WORK/deadlock.pb.gz")
printf '%s\n' "$tags"
for t in "\"locker-a\" ($a)" "\"locker-b\" ($b)" '"waiter"' '"rw-waiter"' '"pi-waiter"' '"reader"' 'cycle 1' 'chain 1' 'mutex 0x' 'rwlock 0x' 'read'; do
    expect_contains "$tags" "$t" "the profile's labels"
done
for k in thread: held_by: waits_for: blocked_seconds: blocked_in:; do
    expect_contains "$tags" "$k" "the profile's label keys"
done
expect_not_contains "$tags" "worker" "the profile's labels"
top=$(pprof -top -sample_index=threads "$WORK/deadlock.pb.gz")
for f in take_ab take_ba wait_behind_reader read_behind_reader lock_pi_behind_reader hold_and_read; do
    expect_contains "$top" "$f" "the profile's stacks"
done

# The watch said the cycle once: wait until the cycle's waits are three
# watch periods older than when it was said, then count the lines.
for i in $(seq 200); do grep -q 'deadlock:' "$WORK/pair.err" && break; sleep 0.05; done
line=$(grep 'deadlock:' "$WORK/pair.err" || true)
printf '%s\n' "$line"
for t in "\"locker-a\" ($a) waits in take_ab" "\"locker-b\" ($b) waits in take_ba"; do
    expect_contains "$line" "$t" "the watch's line"
done
seconds() { fetch "debug/pprof/deadlock?debug=1&min_seconds=1" | sed -n 's/^thread "locker-a" ([0-9]*) waits \([0-9]*\).*/\1/p'; }
first=$(seconds)
for i in $(seq 300); do [ "$(seconds)" -ge $((first + 3)) ] && break; sleep 0.1; done
[ "$(grep -c 'deadlock:' "$WORK/pair.err")" = 1 ] || { cat "$WORK/pair.err" >&2; fail "the cycle was not said exactly once"; }
# ... and wrote the report and a threads dump.
ls "$dumps"
ls "$dumps"/*.deadlock.txt >/dev/null 2>&1 || fail "no report in PPROF_DUMP_DIR"
ls "$dumps"/*.threads.txt >/dev/null 2>&1 || fail "no threads dump in PPROF_DUMP_DIR"
expect_contains "$(cat "$dumps"/*.deadlock.txt)" "in take_ab for mutex" "the written report"
expect_contains "$(cat "$dumps"/*.threads.txt)" "thread \"locker-a\"" "the written threads dump"
expect_contains "$(cat "$dumps"/*.threads.txt)" "take_ab(...)" "the written threads dump"
stop "$PID"
echo ok
