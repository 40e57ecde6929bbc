# pprof-attach on a program started without the agent (attach_target):
# its threads exist before the attach. After the attach the CPU profile
# shows busy_spin with the CPU the spinner thread's own clock counted
# (/proc) over the profile, the threads view lists the threads started
# before, the heap and mutex profiles say since when they record (what
# they record: attach_heap.sh); a second
# attach is refused; the detach closes the port and the program runs on
# untraced; an attach after it works again, from the default settings
# where its command gives none (not the last attach's); pprof-attach killed at
# moments through an attach leaves the program running, not stopped and
# not traced. At the end the program says every sleep, read and wakeup
# came back as it should (no EINTR, no early return) and exits 0.
. "$TOP/test/integration/lib.sh"

attach_target_start
expect_not_contains "$(cat /proc/$PID/maps)" libpprofagent "the target's maps before the attach"

# untraced PID: running on, not stopped, no tracer.
untraced() {
    kill -0 "$1" 2>/dev/null || fail "pid $1 ended"
    grep -q '^TracerPid:[[:space:]]*0$' "/proc/$1/status" &&
        ! grep -q '^State:[[:space:]]*[tT]' "/proc/$1/status"
}

# attach_to [VAR=VALUE...]: attaches to PID on a port of its own, with
# these settings too; sets ADDR.
attach_to() {
    env PPROF_ADDR=127.0.0.1:0 "$@" "$ATTACH" "$PID" 2>"$WORK/attach.err" ||
        { cat "$WORK/attach.err" >&2; fail "pprof-attach $PID failed"; }
    cat "$WORK/attach.err"
    ADDR=$(sed -n 's|^pprofagent: serving http://\([^/]*\)/debug/pprof/ (pid [0-9]*)$|\1|p' "$WORK/attach.err")
    [ -n "$ADDR" ] || fail "pprof-attach printed no serving line"
    untraced "$PID" || fail "the target is left stopped or traced after the attach"
}

# heap_rate: the heap profile's sampling rate the attached agent reports.
heap_rate() {
    fetch debug/stats | python3 -c 'import json, sys; print(json.load(sys.stdin)["heap_sampling_rate"])'
}

attach_to PPROF_HEAP_RATE=4096
[ "$(heap_rate)" = 4096 ] || fail "the attach's PPROF_HEAP_RATE=4096 is not the agent's: $(heap_rate)"

# --- the threads that were there before the attach ---
g=$(fetch 'debug/pprof/goroutine?debug=2')
for f in busy_spin read_in_order wait_in_cond main; do
    expect_contains "$g" "$f(" "goroutine?debug=2 after the attach"
done
for n in spinner reader waiter; do
    expect_contains "$g" "thread \"$n\"" "goroutine?debug=2 after the attach"
done

# --- the profiles fed since the attach say from when ---
fetch debug/pprof/heap >"$WORK/heap.pb.gz"
expect_contains "$(pprof -raw "$WORK/heap.pb.gz")" "since attach at" "the heap profile"
fetch debug/pprof/mutex >"$WORK/mutex.pb.gz"
expect_contains "$(pprof -raw "$WORK/mutex.pb.gz")" "since attach at" "the mutex profile"

# --- the CPU profile against the spinner's own clock ---
spinner_tid=$(grep -lx spinner /proc/$PID/task/*/comm | sed 's|.*/task/\([0-9]*\)/comm|\1|')
[ -n "$spinner_tid" ] || fail "no spinner thread"
profile_against_clock "$spinner_tid" spinner
top=$(pprof -top -cum -unit=ms -nodecount=30 "$WORK/cpu.pb.gz")
echo "$top" | head -n 8
got=$(top_cum "$top" busy_spin)
within 10 "$got" "$want" "busy_spin after the attach"

# --- a second attach is refused, in one line ---
if PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>"$WORK/second.err"; then
    fail "a second attach succeeded"
fi
expect_contains "$(cat "$WORK/second.err")" "already attached" "the second attach's message"
note "second attach: $(cat "$WORK/second.err")"
untraced "$PID" || fail "the target is left stopped or traced after a refused attach"

# --- detach: the port closes, the program runs on ---
"$ATTACH" --detach "$PID" 2>"$WORK/detach.err" ||
    { cat "$WORK/detach.err" >&2; fail "pprof-attach --detach failed"; }
cat "$WORK/detach.err"
if curl -s -o /dev/null --max-time 5 "http://$ADDR/debug/pprof/"; then
    fail "the port is still open after the detach"
fi
untraced "$PID" || fail "the target is left stopped or traced after the detach"
"$ATTACH" --detach "$PID" 2>"$WORK/detach2.err" && fail "a second detach succeeded"
expect_contains "$(cat "$WORK/detach2.err")" "not attached" "the second detach's message"

# --- attach again, without PPROF_HEAP_RATE: the default, not the last one's ---
attach_to
[ "$(heap_rate)" = 524288 ] || fail "the second attach kept the heap rate $(heap_rate), not the default 524288"
expect_contains "$(fetch 'debug/pprof/goroutine?debug=2')" "busy_spin(" "goroutine?debug=2 after the second attach"
"$ATTACH" --detach "$PID" 2>/dev/null || fail "the second detach failed"

# --- pprof-attach killed at moments through an attach ---
# The helper that does the work outlives it: each attach either completes
# (then it is detached) or never started; the target is never left
# stopped, traced or dead.
helper_running() {
    pgrep -f -x "$ATTACH $PID" >/dev/null
}
for delay in 0 0.003 0.01 0.03 0.1 0.3; do
    PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>/dev/null &
    a=$!
    sleep "$delay"
    kill -9 "$a" 2>/dev/null || true
    wait "$a" 2>/dev/null || true
    i=0
    while helper_running; do
        i=$((i + 1)); [ $i -lt 600 ] || fail "the helper still runs 60 s after pprof-attach was killed"
        sleep 0.1
    done
    wait_until "the target untraced after pprof-attach was killed at $delay s" untraced "$PID"
    # Attached or not, never half: a detach succeeds, or says it is not.
    if ! "$ATTACH" --detach "$PID" 2>"$WORK/kdetach.err"; then
        case "$(cat "$WORK/kdetach.err")" in
            *"not attached"* | *"not loaded"*) ;;
            *) cat "$WORK/kdetach.err" >&2; fail "after a kill at $delay s, detach failed" ;;
        esac
    fi
    untraced "$PID" || fail "the target stopped or traced after the kill at $delay s"
done
note "pprof-attach killed at 6 moments: the target ran on untraced"

# --- the program's own account ---
touch "$STOPFILE"
wait_exit "$PID" 60
cat "$WORK/target.out" | tail -n 3
expect_contains "$(cat "$WORK/target.out")" "rounds_ok eintr=0 short=0 bad=0" "the target's account"
[ "$STATUS" = 0 ] || fail "the target exited with $STATUS"

# --- a preloaded agent is refused, in one line, and left serving ---
start_agent pre "$BUILD/test/programs/attach_target" "$WORK/stop-pre"
if PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>"$WORK/pre.err"; then
    fail "an attach to a preloaded agent succeeded"
fi
expect_contains "$(cat "$WORK/pre.err")" "preloaded" "the attach to a preloaded agent"
note "preloaded: $(cat "$WORK/pre.err")"
untraced "$PID" || fail "the preloaded target is left stopped or traced"
[ "$(http_status debug/pprof/)" = 200 ] || fail "the preloaded agent stopped serving"
touch "$WORK/stop-pre"
wait_exit "$PID" 60
[ "$STATUS" = 0 ] || fail "the preloaded target exited with $STATUS"
