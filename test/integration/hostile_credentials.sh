# Tools that change their credentials or namespaces and then exec, run
# within the start delay under the agent: their status and output are
# those without it. The C library applies setuid() and the like to every
# thread and aborts the process if one cannot follow (setpriv raises the
# capability it needs in its own thread only), and unshare(CLONE_NEWUSER)
# refuses a process with more than one thread: the agent's waiting thread
# is away for those calls. Then a process that unshared still gets its
# server when the delay ends.
. "$TOP/test/integration/lib.sh"

# run NAME COMMAND...: the same status and output with and without the
# agent (a command the machine refuses without it is left out).
run() {
    name=$1; shift
    set +e
    "$@" > "$WORK/plain.out" 2>&1; plain=$?
    env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 "$@" > "$WORK/agent.out" 2>&1; agent=$?
    set -e
    if [ "$plain" != 0 ]; then
        note "$name: fails without the agent too ($plain), left out"
        return 0
    fi
    note "$name: status $agent (without the agent $plain)"
    [ "$agent" = "$plain" ] || { cat "$WORK/agent.out"; fail "$name: status $agent, expected $plain"; }
    cmp -s "$WORK/plain.out" "$WORK/agent.out" || { cat "$WORK/agent.out"; fail "$name: output changed"; }
    ran=$((ran + 1))
}
ran=0
command -v setpriv > /dev/null && {
    run "setpriv, groups cleared" setpriv --reuid=65534 --regid=65534 --clear-groups id -u
    run "setpriv, init-groups" setpriv --regid=65534 --reuid=65534 --init-groups id -g
}
command -v unshare > /dev/null && {
    run "unshare -r" unshare -r id -u
    run "unshare -r -m" unshare -r -m id -u
}
[ "$ran" -gt 0 ] || fail "neither setpriv nor unshare could run here"

# The starter must be gone from the process, not only joined, when the
# call runs: a joined thread leaves the kernel's thread list a moment
# later (half of 150 runs failed beside two CPU hogs when that was not
# waited for).
if command -v unshare > /dev/null && unshare -r -m true 2> /dev/null; then
    bad=0
    for i in $(seq 40); do
        env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 unshare -r -m true 2> /dev/null || bad=$((bad + 1))
    done
    note "unshare -r -m: $bad of 40 failed under the agent"
    [ "$bad" = 0 ] || fail "unshare -r -m failed $bad times of 40 under the agent"
fi

# A process that unshared within the delay is served once it ends.
if command -v unshare > /dev/null && unshare -r true 2> /dev/null; then
    env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$WORK/u.port" \
        unshare -r sh -c 'sleep 4' 2> "$WORK/u.err" &
    pid=$!
    for i in $(seq 100); do [ -s "$WORK/u.port" ] && break; sleep 0.05; done
    [ -s "$WORK/u.port" ] || { cat "$WORK/u.err"; fail "no server after unshare"; }
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$(cat "$WORK/u.port")/debug/pprof/cmdline")" = 200 ] ||
        fail "the unshared process does not answer"
    wait "$pid"
fi

# A process that gave up root is not dumpable: its threads' syscall files
# are root's. The wall profile still tells running from sleeping (stat is
# everyone's), and the threads dump says the process is not dumpable
# instead of blaming EINTR (undumpable_stacks checks the stacks).
if [ "$(id -u)" = 0 ] && command -v python3 > /dev/null; then
    rm -f "$WORK/d.port"
    # The interpreter itself, not a wrapper on PATH (a pyenv shim): a
    # wrapper that lives past the delay serves and writes the port file,
    # which the interpreter's image then removes (exec_port_file).
    py=$(python3 -c 'import sys; print(sys.executable)')
    env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$WORK/d.port" PPROF_RUN_DIR=off \
        "$py" "$TOP/test/integration/dropper.py" 8 2> "$WORK/d.err" &
    pid=$!
    for i in $(seq 100); do [ -s "$WORK/d.port" ] && break; sleep 0.05; done
    [ -s "$WORK/d.port" ] || { cat "$WORK/d.err"; fail "the process that gave up root does not serve"; }
    a=$(cat "$WORK/d.port")
    curl -s -o "$WORK/d.pb.gz" "http://$a/debug/pprof/wall?seconds=3"
    dump=$(curl -s "http://$a/debug/pprof/goroutine?debug=2")
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    states=$(pprof -tags "$WORK/d.pb.gz" | sed -n '/ state:/,/^ *$/p')
    echo "$states"
    expect_contains "$states" "running" "the wall profile of a process that gave up root"
    expect_contains "$states" "sleeping" "the wall profile of a process that gave up root"
    expect_contains "$dump" "not dumpable" "the threads dump of a process that gave up root"
    expect_not_contains "$dump" "EINTR" "the threads dump of a process that gave up root"
fi
echo ok
