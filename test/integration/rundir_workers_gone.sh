# A root service's workers that leave root (nginx's switch to nobody) or
# are killed leave no announcement behind once the service has stopped.
#
# test/programs/worker_setuid: a root master forks two workers that switch
# to nobody at once; on SIGTERM it ends one with SIGTERM (the worker calls
# exit) and the other with SIGKILL, reaps both and exits. A worker's file
# sits in the root's run directory (mode 700), which nobody cannot enter:
# the worker's own removal at exit fails, and a killed one removes
# nothing. Before, both files stayed until some later process listed the
# folder (nginx stopped by QUIT left one file per worker in
# /run/pprofagent at every restart); now the master, the family's first
# process, removes the files of its family's processes that are gone as it
# exits. Output and status are those without the agent.
. "$TOP/test/integration/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (workers that switch to nobody)"
P="$BUILD/test/programs/worker_setuid"
mkdir -m 700 "$WORK/run"
# two_workers OUT: both workers have said they run as nobody.
two_workers() { [ "$(grep -c '^worker [12]: uid 65534$' "$1")" = 2 ]; }

"$P" > "$WORK/plain.out" 2>&1 &
plain=$!
PIDS="$PIDS $plain"
wait_until "both workers without the agent" two_workers "$WORK/plain.out"
kill -TERM "$plain"
wait "$plain" && plain_status=0 || plain_status=$?

start_agent setuid "$P"
wait_until "both workers under the agent" two_workers "$WORK/setuid.out"
# All three serve: the master lists itself and both workers.
listed() { [ "$(fetch debug/pprof/processes | grep -c 'http://')" = 3 ]; }
wait_until "three processes listed" listed
ls -l "$WORK/run" | sed 's/^/# /'
kill -TERM "$PID"
wait_exit "$PID" 30
left=$(ls "$WORK/run")
[ -z "$left" ] || { ls -l "$WORK/run" >&2; fail "announcements left after the service stopped: $(echo $left)"; }
sort "$WORK/plain.out" > "$WORK/plain.sorted"
sort "$WORK/setuid.out" > "$WORK/setuid.sorted"
cmp -s "$WORK/plain.sorted" "$WORK/setuid.sorted" || { diff "$WORK/plain.sorted" "$WORK/setuid.sorted" >&2; fail "output changed"; }
[ "$STATUS" = "$plain_status" ] || fail "status $STATUS under the agent, $plain_status without"
note "no announcement left; same output, status $STATUS"
echo ok
