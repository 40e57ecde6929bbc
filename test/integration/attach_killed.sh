# pprof-attach's helper (the process that stops the target's thread and
# makes the calls) killed with SIGKILL at random moments of an attach:
# the target must live on, untraced, and its interrupted system call must
# come back as it would have. Each call returns into a signal frame that
# gives the thread its own registers back (attach/sigframe.c), so a
# helper killed mid-call leaves a thread that returns to where it was;
# with a return address of 0 instead, 3 of 20 targets died of SIGSEGV.
# Rounds go on until 4 helpers were killed during the calls (after the
# agent was mapped, before the attach was said done), 60 at most.
# The target is cat, blocked in read() on a pipe (a restartable call):
# after the round it must copy a line and exit 0 at the end of its input
# (a read that returned EINTR would end it with an error).
. "$TOP/test/integration/lib.sh"

ATTACH="$BUILD/pprof-attach"
[ -x "$ATTACH" ] || fail "no $ATTACH (make test-bins builds it)"

# mapped: 0 when the agent is among cat's mappings (shell builtins only).
mapped() {
    while read -r line; do
        case "$line" in *libpprofagent*) return 0 ;; esac
    done <"/proc/$PID/maps"
    return 1
}

# kill_helper_of PID SPINS: kills the first child of PID (the helper
# pprof-attach forks) with SIGKILL, SPINS turns of a loop after the agent
# appeared in cat's mappings (dlopen has begun); shell builtins only, so
# that the kill comes within the few milliseconds of the calls.
kill_helper_of() {
    h=""
    while [ -z "$h" ] && kill -0 "$1" 2>/dev/null; do
        read -r h _ <"/proc/$1/task/$1/children" 2>/dev/null || true
    done
    while kill -0 "$1" 2>/dev/null && ! mapped 2>/dev/null; do :; done
    i=0
    while [ "$i" -lt "$2" ]; do i=$((i + 1)); done
    [ -z "$h" ] || kill -9 "$h" 2>/dev/null || true
}

# ended: cat is gone or a zombie. settled: ended, or not traced.
ended() {
    [ ! -e "/proc/$PID/status" ] || grep -q '^State:[[:space:]]*Z' "/proc/$PID/status"
}
settled() {
    ended || grep -q '^TracerPid:[[:space:]]*0$' "/proc/$PID/status"
}

hits=0
round=0
while [ "$hits" -lt 4 ] && [ "$round" -lt 60 ]; do
    round=$((round + 1))
    rm -f "$WORK/in"
    mkfifo "$WORK/in"
    cat <"$WORK/in" >"$WORK/cat.out" 2>"$WORK/cat.err" &
    PID=$!
    PIDS="$PIDS $PID"
    exec 3>"$WORK/in"
    wait_until "cat to block in read" grep -q '^State:[[:space:]]*S' "/proc/$PID/status"
    PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>"$WORK/attach.err" &
    apid=$!
    kill_helper_of "$apid" $(( (round % 6) * 500 ))
    wait "$apid" 2>/dev/null || true
    # Killed after the agent was mapped and before it was said attached:
    # during the calls.
    ! grep -q libpprofagent "/proc/$PID/maps" 2>/dev/null ||
        grep -q 'attached to' "$WORK/attach.err" || hits=$((hits + 1))
    wait_until "round $round: cat untraced, or ended" settled
    if ended; then
        rc=0
        wait "$PID" || rc=$?
        fail "round $round: cat died (status $rc) after its pprof-attach helper was killed: $(cat "$WORK/cat.err")"
    fi
    echo "round $round" >&3
    wait_until "round $round: cat to copy its line" grep -q "^round $round\$" "$WORK/cat.out"
    exec 3>&-
    rc=0
    wait "$PID" || rc=$?
    [ "$rc" = 0 ] || fail "round $round: cat exited $rc after its pprof-attach helper was killed: $(cat "$WORK/cat.err")"
done
note "$hits of $round helpers were killed after the agent was mapped and before the attach was done"
[ "$hits" -gt 0 ] || fail "no helper of $round was killed during the calls: nothing was tested"
