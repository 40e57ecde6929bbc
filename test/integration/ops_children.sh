# The fork and exec policy: forked children (a prefork server's workers)
# each serve on a port of their own and are listed by every process of the
# family; with PPROF_CHILDREN=off they serve nothing; a second process that
# finds the configured port taken (an exec'd child, a second instance)
# serves on port 0 instead and says so in one line; a killed worker's
# announcement is never listed and is cleaned up; children that end at once
# leave no announcement behind.
. "$TOP/test/integration/lib.sh"
export PPROF_RUN_DIR="$WORK/run"
prog="$BUILD/test/programs/fork_bench"

count_listed() { fetch debug/pprof/processes | grep -c 'http://' || true; }

# Three workers that live until the test ends (killed with their parent),
# at most past the runner's limit (400 s): 30 s ran out mid-test beside
# another test at load 10, and the second process below then took the
# port the parent had left.
start_agent prefork "$prog" hold 3 600
i=0
while [ "$(count_listed)" -lt 4 ]; do
    i=$((i + 1)); [ $i -lt 100 ] || { fetch debug/pprof/processes; fail "expected the parent and 3 workers"; }
    sleep 0.1
done
listing=$(fetch debug/pprof/processes)
printf '%s\n' "$listing"
PIDS="$PIDS $(pgrep -P "$PID" | tr '\n' ' ')"
for w in $(pgrep -P "$PID"); do
    url=$(printf '%s\n' "$listing" | awk -v p="$w" '$1 == p { print $4 }')
    [ -n "$url" ] || fail "worker $w is not listed"
    # Each worker answers for itself: its own threadcreate count and cmdline.
    cmd=$(curl -sS --max-time 10 "${url}cmdline" | tr '\0' ' ')
    expect_contains "$cmd" "fork_bench hold 3 600" "worker $w cmdline"
    wpid=$(curl -sS --max-time 10 "${url}processes" | awk '/ self$/ { print $1 }')
    [ "$wpid" = "$w" ] || fail "worker $w's server says it is $wpid"
done

# pprof-snapshot --all takes every process of the family at once.
sh "$TOP/scripts/pprof-snapshot" --all "$ADDR" "$WORK/snap" 0 > "$WORK/snap.log" 2>&1 \
    || { cat "$WORK/snap.log"; ls -R "$WORK/snap"; fail "pprof-snapshot --all failed"; }
[ "$(ls -d "$WORK"/snap/*-fork_bench | wc -l)" = 4 ] || { ls "$WORK/snap"; fail "expected 4 snapshots"; }
for w in $(pgrep -P "$PID") "$PID"; do
    d="$WORK/snap/$w-fork_bench"
    [ -s "$d/threadcreate.pb.gz" ] && [ -s "$d/heap.pb.gz" ] || { ls "$d"; cat "$WORK/snap/$w-fork_bench.log" "$WORK/prefork.err"; ps -o pid,stat,etime,cmd --ppid "$PID" -p "$PID" || true; fail "snapshot of $w is incomplete"; }
    expect_contains "$(cat "$d/cmdline.txt")" "fork_bench hold 3 600" "snapshot of $w"
done

# A worker killed with SIGKILL leaves its file; it is never listed, and the
# listing removes it.
victim=$(pgrep -P "$PID" | head -n 1)
kill -9 "$victim"
[ -e "$WORK/run/pid-$victim" ] || note "the killed worker's file is already gone"
# Until the kernel has reaped it (its parent waits), it may still be seen.
listed_3() { [ "$(count_listed)" = 3 ]; }
wait_until "a dead worker is still listed" listed_3
[ ! -e "$WORK/run/pid-$victim" ] || fail "the killed worker's file was not cleaned up"
parent=$PID
parent_addr=$ADDR

# A second process with the parent's fixed port falls back to port 0.
port=${parent_addr##*:}
env LD_PRELOAD="$AGENT" PPROF_ADDR="127.0.0.1:$port" PPROF_CHILDREN=off \
    "$prog" hold 1 30 >"$WORK/second.out" 2>"$WORK/second.err" &
second=$!
PIDS="$PIDS $second"
i=0
while ! grep -q "serving http" "$WORK/second.err"; do
    i=$((i + 1)); [ $i -lt 100 ] || { cat "$WORK/second.err"; fail "no fallback line"; }
    sleep 0.1
done
cat "$WORK/second.err"
[ "$(grep -c '^pprofagent:' "$WORK/second.err")" = 1 ] || fail "the fallback took more than one line"
grep -q "^pprofagent: cannot serve on 127.0.0.1:$port (Address already in use); serving http://127.0.0.1:[0-9]*/debug/pprof/ instead (pid $second)\$" \
    "$WORK/second.err" || fail "fallback message"
# It is announced, lists itself, and is not of the first one's family
# (ops_family.sh tests families).
i=0
while ! second_addr=$(awk '{ print $5 }' "$WORK/run/pid-$second" 2>/dev/null) || [ -z "$second_addr" ]; do
    i=$((i + 1)); [ $i -lt 50 ] || fail "the second process is not announced"
    sleep 0.1
done
second_list() { curl -fsS --max-time 10 "http://$second_addr/debug/pprof/processes"; }
second_list | grep -q "^$second .* self$" || fail "the second process does not list itself"
! fetch debug/pprof/processes | grep -q "^$second " || fail "an unrelated process is listed in the first one's family"
# PPROF_CHILDREN=off: its worker serves nothing and is not listed.
sleep 0.5
w2=$(pgrep -P "$second")
! second_list | grep -q "^$w2 " || fail "a child was listed with PPROF_CHILDREN=off"
[ ! -e "$WORK/run/pid-$w2" ] || fail "a child announced itself with PPROF_CHILDREN=off"
# A daemon's first fork: the parent exits at once, the daemon takes over the
# configured port (the parent's listening socket is not kept open in the
# child), so the operator finds it where PPROF_ADDR said.
dport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
env LD_PRELOAD="$AGENT" PPROF_ADDR="127.0.0.1:$dport" PPROF_PORT_FILE="$WORK/daemon.port" \
    "$prog" daemon 20 >"$WORK/daemon.out" 2>"$WORK/daemon.err" || fail "the daemon's parent failed"
i=0
while ! self=$(curl -sS --max-time 2 "http://127.0.0.1:$dport/debug/pprof/processes" 2>/dev/null | awk '/ self$/ { print $1 }') || [ -z "$self" ]; do
    i=$((i + 1)); [ $i -lt 50 ] || { cat "$WORK/daemon.err"; fail "nobody serves on the configured port after the daemon's fork"; }
    sleep 0.1
done
[ "$(cat /proc/$self/cmdline | tr '\0' ' ')" = "$prog daemon 20 " ] || fail "port $dport is served by $self, not the daemon"
# The parent exited before serving, so the daemon is the one that says
# where it serves, in one line.
[ "$(cat "$WORK/daemon.err")" = "pprofagent: serving http://127.0.0.1:$dport/debug/pprof/ (pid $self)" ] ||
    { cat "$WORK/daemon.err"; fail "the daemon did not say where it serves in one line"; }
# The parent exited before serving: the daemon writes the port file.
for i in $(seq 50); do [ -s "$WORK/daemon.port" ] && break; sleep 0.1; done
[ "$(cat "$WORK/daemon.port" 2>/dev/null)" = "127.0.0.1:$dport" ] || fail "the daemon's port file: $(cat "$WORK/daemon.port" 2>/dev/null)"
note "daemon $self serves on the configured port $dport"
kill "$self"

# Workers forked at once (nginx forks its workers within the start delay)
# leave the configured port to their parent: the parent serves there in
# every run, each worker on a port of its own, and the only line at the
# default level is the parent's.
for run in 1 2 3 4 5; do
    wport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    env LD_PRELOAD="$AGENT" PPROF_ADDR="127.0.0.1:$wport" "$prog" hold 3 6 \
        > /dev/null 2>"$WORK/early-$run.err" &
    early=$!
    PIDS="$PIDS $early"
    i=0
    while ! owner=$(curl -sS --max-time 2 "http://127.0.0.1:$wport/debug/pprof/processes" 2>/dev/null | awk '/ self$/ { print $1 }') \
            || [ -z "$owner" ]; do
        i=$((i + 1)); [ $i -lt 100 ] || fail "run $run: nobody serves on the configured port $wport"
        sleep 0.1
    done
    [ "$owner" = "$early" ] || fail "run $run: port $wport is served by $owner, not the parent $early"
    listed=0
    while [ "$listed" -lt 4 ]; do
        listed=$(curl -sS --max-time 2 "http://127.0.0.1:$wport/debug/pprof/processes" | grep -c 'http://' || true)
        i=$((i + 1)); [ $i -lt 200 ] || fail "run $run: the parent lists $listed processes, not 4"
        sleep 0.1
    done
    [ "$(cat "$WORK/early-$run.err")" = "pprofagent: serving http://127.0.0.1:$wport/debug/pprof/ (pid $early)" ] ||
        { cat "$WORK/early-$run.err"; fail "run $run: more than the parent's one line"; }
    kill "$early" $(pgrep -P "$early") 2>/dev/null || true
done
note "5 runs: the parent served on the configured port, its 3 workers listed, one line"

# A run directory that others can write to (a planted /tmp folder) is not
# used: one line, nothing written there, the program unharmed.
mkdir -m 1777 "$WORK/shared"
set +e
env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_RUN_DIR="$WORK/shared" \
    PPROF_START_DELAY_MS=0 "$prog" exit 1 >"$WORK/shared.out" 2>"$WORK/shared.err"
status=$?
set -e
[ "$status" = 0 ] || fail "the program failed with a foreign run directory"
grep -q "cannot announce this process in PPROF_RUN_DIR $WORK/shared: not a folder of this user's" "$WORK/shared.err" \
    || { cat "$WORK/shared.err"; fail "no refusal of a world-writable run directory"; }
[ -z "$(ls "$WORK/shared")" ] || fail "files written into a world-writable run directory"

# Children that end at once leave no file behind: a root service's child
# reserves its announcement only when it changes its user or group (before
# it gives up root) or its server starts, and removes it whether it ends
# by _exit or execs a program that exits. Without that, one file per fork
# stayed until a listing swept them.
if [ "$(id -u)" = 0 ]; then
    for mode in exit exec; do
        env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_RUN_DIR="$WORK/short-$mode" \
            "$prog" $mode 200 > /dev/null 2>"$WORK/short-$mode.err" \
            || { cat "$WORK/short-$mode.err"; fail "fork_bench $mode failed under the agent"; }
        left=$(ls "$WORK/short-$mode" 2>/dev/null | wc -l)
        note "200 children that $mode at once: $left announcement files left"
        [ "$left" -le 1 ] || fail "$left announcement files left by 200 children that $mode at once"
    done
else
    note "not root: children reserve no file before their server starts; leftovers not checked"
fi

for p in $(pgrep -P "$parent") $(pgrep -P "$second") "$second" "$parent"; do
    kill "$p" 2>/dev/null || true
done
echo ok
