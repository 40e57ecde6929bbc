# The host ends while a CPU profile is being taken, by exit() from a
# thread, _exit, abort, exec, or returning from main: its exit status and
# output are those of the same program without the agent, and it ends
# promptly (no hang in the agent's destructors or threads).
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/hostile"
for how in thread-exit _exit abort exec return; do
    set +e
    "$H" end "$how" 1.5 > "$WORK/plain.out" 2> /dev/null; plain=$?
    set -e
    rm -f "$WORK/p.port"
    start=$(date +%s)
    env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$WORK/p.port" \
        PPROF_HEAP_RATE=4096 "$H" end "$how" 1.5 > "$WORK/agent.out" 2> "$WORK/agent.err" &
    pid=$!
    for i in $(seq 100); do [ -s "$WORK/p.port" ] && break; sleep 0.05; done
    curl -s -o /dev/null --max-time 20 "http://$(cat "$WORK/p.port")/debug/pprof/profile?seconds=10" &
    curl_pid=$!
    if wait "$pid"; then agent=0; else agent=$?; fi
    took=$(( $(date +%s) - start ))
    wait "$curl_pid" || true
    note "$how: status $agent (without the agent $plain), ${took}s"
    [ "$agent" = "$plain" ] || { cat "$WORK/agent.err"; fail "$how: status $agent, expected $plain"; }
    cmp -s "$WORK/plain.out" "$WORK/agent.out" || fail "$how: output changed"
    [ "$took" -le 8 ] || fail "$how: took ${took}s to end"
done
echo ok
