# fork() from a host whose other threads allocate and lock without pause,
# during a CPU profile and heap sampling: every child (malloc, mutex,
# pthread_create, write, _exit) finishes, none deadlocks on a lock held at
# fork time. An exec'd program inherits LD_PRELOAD: a fixed port already
# taken costs it at most one line, its output and status are unchanged.
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/hostile"
export PPROF_HEAP_RATE=4096
# It forks until the profile has been taken (a run for a fixed 6 s ended
# before its 3 s profile did at load 9), then one second more.
start_agent forks "$H" forks 120 "$WORK/forks.stop"
sleep 0.5
fetch 'debug/pprof/profile?seconds=3' > "$WORK/cpu.pb.gz"
pprof -top "$WORK/cpu.pb.gz" > /dev/null
sleep 1
: > "$WORK/forks.stop"
wait_exit "$PID" 60
[ "$STATUS" = 0 ] || fail "host exited with $STATUS"
line=$(grep '^forks=' "$WORK/forks.out") || fail "no summary: $(tail -n 3 "$WORK/forks.out")"
note "$line"
forks=$(echo "$line" | sed 's/forks=\([0-9]*\) ok=.*/\1/')
ok=$(echo "$line" | sed 's/.* ok=//')
[ "$forks" = "$ok" ] || { cat "$WORK/forks.err" >&2; fail "$((forks - ok)) of $forks children failed"; }
[ "$forks" -ge 20 ] || fail "only $forks forks while a 3 s profile was taken"
[ "$(grep -c '^child ' "$WORK/forks.out")" = "$forks" ] || fail "a child's output is missing"
unset PPROF_HEAP_RATE

# exec with the parent's fixed port still bound.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
set +e
"$H" end exec 0.5 > "$WORK/plain.out" 2> "$WORK/plain.err"; plain=$?
env LD_PRELOAD="$AGENT" PPROF_ADDR="127.0.0.1:$port" "$H" end exec 0.5 \
    > "$WORK/exec.out" 2> "$WORK/exec.err"; agent=$?
set -e
[ "$plain" = 5 ] && [ "$agent" = 5 ] || fail "exec: status $agent under the agent, $plain without"
cmp -s "$WORK/plain.out" "$WORK/exec.out" || fail "exec: output changed"
cat "$WORK/exec.err"
n=$(grep -c '^pprofagent:' "$WORK/exec.err" || true)
[ "$n" -le 1 ] || fail "the exec'd program printed $n agent lines"
[ "$(grep -vc '^pprofagent:' "$WORK/exec.err")" = 0 ] || fail "other stderr output"
echo ok
