# pprof-attach on shells: the launcher scripts (version-manager shims)
# that run the real program. One that replaces itself by the program
# (execve) as soon as the agent is mapped in it: the attach's calls
# succeed, then the new program drops the agent with the old program's
# libraries. pprof-attach must say so (the pid runs on), never that the
# pid ended; the program runs on and exits with its own status. Which
# comes first, the agent serving or the exec, is the machine's choice:
# served, pprof-attach printed the serving line; otherwise it names the
# exec and the program now running. Then a shell that waits for its
# child: attached, it serves, the child runs on and the shell still waits,
# and passes on the child's exit status.
. "$TOP/test/integration/lib.sh"

ATTACH="$BUILD/pprof-attach"
[ -x "$ATTACH" ] || fail "no $ATTACH (make test-bins builds it)"

untraced() {
    grep -q '^TracerPid:[[:space:]]*0$' "/proc/$1/status" &&
        ! grep -q '^State:[[:space:]]*[tTZ]' "/proc/$1/status"
}

# --- a shell that replaces itself once the agent is in it ---
cat >"$WORK/shim.sh" <<'SH'
echo started
while ! grep -q libpprofagent "/proc/$$/maps"; do :; done
exec sh -c 'echo replaced; while [ ! -e "$1" ]; do sleep 0.05; done; exit 7' sh "$1"
SH
bash "$WORK/shim.sh" "$WORK/stop1" >"$WORK/shim.out" 2>&1 &
PID=$!
PIDS="$PIDS $PID"
wait_until "the shim to start" grep -q started "$WORK/shim.out"
if PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>"$WORK/attach1.err"; then rc=0; else rc=$?; fi
cat "$WORK/attach1.err"
wait_until "the shim to run its program" grep -q replaced "$WORK/shim.out"
expect_not_contains "$(cat "$WORK/attach1.err")" "ended" "pprof-attach on a pid that runs on"
if [ "$rc" = 0 ]; then
    expect_contains "$(cat "$WORK/attach1.err")" "serving http://" "an attach that succeeded"
    note "the agent served before the exec"
else
    expect_contains "$(cat "$WORK/attach1.err")" "ran a new program (execve; it runs /" "an attach undone by the exec"
    note "the exec came before the agent served: said so"
fi
untraced "$PID" || fail "the shim is left stopped or traced"
expect_not_contains "$(cat /proc/$PID/maps)" libpprofagent "the maps after the exec"
touch "$WORK/stop1"
wait_exit "$PID" 60
[ "$STATUS" = 7 ] || fail "the replaced program exited with $STATUS, not its 7"

# --- a shell that waits for its child ---
bash -c 'echo started; sh -c "while [ ! -e \"\$1\" ]; do sleep 0.05; done; exit 5" sh "$1"; echo "child $?"; exit 3' \
    bash "$WORK/stop2" >"$WORK/wait.out" 2>&1 &
PID=$!
PIDS="$PIDS $PID"
wait_until "the waiting shell to start" grep -q started "$WORK/wait.out"
child=$(pgrep -P "$PID")
[ -n "$child" ] || fail "the shell has no child"
PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>"$WORK/attach2.err" ||
    { cat "$WORK/attach2.err" >&2; fail "pprof-attach on a waiting shell failed"; }
expect_contains "$(cat "$WORK/attach2.err")" "serving http://" "the attach to a waiting shell"
untraced "$PID" || fail "the waiting shell is left stopped or traced"
kill -0 "$child" || fail "the child ended at the attach"
[ "$(pgrep -P "$PID")" = "$child" ] || fail "the shell's child changed at the attach"
touch "$WORK/stop2"
wait_exit "$PID" 60
[ "$STATUS" = 3 ] || fail "the waiting shell exited with $STATUS, not its 3"
expect_contains "$(cat "$WORK/wait.out")" "child 5" "the shell's wait for its child"
note "the waiting shell served, waited on and passed its child's 5"
