# The host's processes live and end as without the agent, however they are
# made: each case runs the same program without the agent and under it and
# wants the same output, the same status, nothing on stderr (but the line of
# the process started by hand, when it lived to serve) and no process left
# behind.
# - fork() in a program whose own malloc lock is taken by its atfork
#   prepare handler and released by its child handler (the agent's child
#   step runs first: a thread created there waited for that lock for ever);
# - a raw clone (no fork handlers) whose child calls unshare (the agent's
#   hook waited to join a thread of the parent);
# - a forked child that installs a seccomp filter killing unlink and exits,
#   within the start delay and after its server started (the agent's
#   unlink at exit killed the main thread; the agent's threads kept the
#   process alive);
# - a forked child whose only thread ends alone (exit system call);
# - valgrind's leak check (the starter's thread memory was "possibly lost"),
#   also of a program that lives past the start delay and is asked once
#   (the thread-vector blocks of the agent's threads still running at exit
#   were "possibly lost": status 7 for a clean program).
# And: an exec'd descendant keeps one thread and says nothing, while the
# process started by hand serves (PPROF_EXEC_CHILDREN=serve opts in); only
# the process started with PPROF_PORT_FILE writes it.
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/host_lifecycle"
A="$BUILD/test/programs/atfork_alloc"

# left PATTERN: fails when a process whose command line matches is left.
left() {
    p=$(pgrep -f "$1" || true)
    [ -z "$p" ] || { ps -o pid,ppid,stat,args -p "$(echo $p | tr ' ' ,)" >&2; fail "processes left behind: $p"; }
}

# same NAME CMD...: CMD without and under the agent (60 s at most each: a
# hang is reported, not waited for); same stdout and status, nothing on
# the agent run's stderr, nothing left.
same() {
    name=$1; shift
    set +e
    timeout -k 5 60 "$@" > "$WORK/$name.plain" 2> "$WORK/$name.plain.err"; plain=$?
    timeout -k 5 60 env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 "$@" \
        > "$WORK/$name.agent" 2> "$WORK/$name.agent.err"; agent=$?
    set -e
    cat "$WORK/$name.agent"
    [ "$plain" = "$agent" ] || fail "$name: status $agent under the agent, $plain without"
    [ "$agent" != 124 ] || fail "$name: timed out"
    cmp -s "$WORK/$name.plain" "$WORK/$name.agent" || { diff "$WORK/$name.plain" "$WORK/$name.agent" >&2; fail "$name: output changed"; }
    # The process started by hand may say where it serves, once; nothing else.
    n=$(grep -vc '^pprofagent: serving http://127\.0\.0\.1:[0-9]*/debug/pprof/ (pid [0-9]*)$' "$WORK/$name.agent.err" || true)
    [ "$n" = 0 ] && [ "$(grep -c . "$WORK/$name.agent.err")" -le 1 ] ||
        { cat "$WORK/$name.agent.err" >&2; fail "$name: the agent printed"; }
    left "$BUILD/test/programs/(host_lifecycle|atfork_alloc)"
    note "$name: same output, status $agent"
}

same atfork "$A" 3
same clone-unshare "$H" clone-unshare
# valgrind with the default start delay (1 s): the run ends well within it.
same valgrind valgrind -q --leak-check=full --error-exitcode=7 "$H" quick
# valgrind on a program that is served before it exits: it lives until the
# test asked its server once (a short delay: valgrind starts slowly).
VG="valgrind -q --leak-check=full --error-exitcode=7"
touch "$WORK/go"
set +e
$VG "$H" until "$WORK/go" > "$WORK/vg-live.plain" 2>&1; plain=$?
set -e
rm -f "$WORK/go"
PPROF_START_DELAY_MS=200 PPROF_PORT_FILE="$WORK/vg-live.port" LD_PRELOAD="$AGENT" \
    PPROF_ADDR=127.0.0.1:0 $VG "$H" until "$WORK/go" > "$WORK/vg-live.out" 2>&1 &
PID=$!
PIDS="$PIDS $PID"
wait_until "valgrind's program serves" test -s "$WORK/vg-live.port"
ADDR=$(cat "$WORK/vg-live.port")
fetch debug/pprof/cmdline | grep -q "until" || fail "valgrind's program does not answer"
touch "$WORK/go"
wait_exit "$PID" 120
cat "$WORK/vg-live.out"
[ "$STATUS" = "$plain" ] ||
    fail "valgrind-live: status $STATUS under the agent, $plain without"
note "valgrind-live: served, status $STATUS"
# A short delay, so that a child sandboxed 0.5 s in has a server by then.
export PPROF_START_DELAY_MS=200
same seccomp-early "$H" seccomp 50
same seccomp-served "$H" seccomp 500
same thread-exit "$H" thread-exit 50

# The exec'd child counts its threads 0.6 s in (three start delays): one,
# and no line from it; its parent, started by hand, serves.
start_agent execs "$H" exec-threads 600
fetch debug/pprof/cmdline | grep -q exec-threads || fail "the parent does not serve"
wait_exit "$PID" 60
cat "$WORK/execs.out"
[ "$STATUS" = 0 ] || fail "the exec'd child did not have one thread (status $STATUS)"
[ "$(grep -c . "$WORK/execs.err")" = 1 ] || { cat "$WORK/execs.err"; fail "more than the parent's one line"; }
grep -q "(pid $PID)" "$WORK/execs.err" || fail "the line is not the parent's"
# Asked to, the exec'd child serves (and has its threads), and says so at
# PPROF_LOG=info; PPROF_PORT_FILE still names the parent, the process
# started with it (the child wrote it too, after the parent).
export PPROF_EXEC_CHILDREN=serve PPROF_LOG=info
start_agent execs-serve "$H" exec-threads 600
wait_exit "$PID" 60
cat "$WORK/execs-serve.err"
grep -q 'threads=[2-9]' "$WORK/execs-serve.out" || { cat "$WORK/execs-serve.out"; fail "PPROF_EXEC_CHILDREN=serve: the exec'd child did not serve"; }
grep -q "serving http://$(cat "$WORK/execs-serve.port")/debug/pprof/ (pid $PID)" "$WORK/execs-serve.err" ||
    fail "PPROF_PORT_FILE ($(cat "$WORK/execs-serve.port")) does not name the parent $PID"
[ "$(grep -c 'serving' "$WORK/execs-serve.err")" = 2 ] || fail "PPROF_EXEC_CHILDREN=serve: not two serving lines"
echo ok
