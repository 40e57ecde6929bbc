# The host's output and exit status are the same with and without the agent
# when the port is taken, the agent is off, or the environment is bad; each
# problem costs one line on stderr.
. "$TOP/test/integration/lib.sh"


run_case() { # name env...
    name=$1; shift
    set +e
    env LD_PRELOAD="$AGENT" "$@" sh -c 'echo out-line; echo err-line >&2; exit 7' \
        >"$WORK/$name.out" 2>"$WORK/$name.err"
    status=$?
    set -e
    [ "$status" = 7 ] || fail "$name: exit status $status, expected 7"
    [ "$(cat "$WORK/$name.out")" = out-line ] || fail "$name: stdout changed"
    grep -qx err-line "$WORK/$name.err" || fail "$name: host stderr lost"
}

# A port that is already taken.
python3 - "$WORK/taken.port" <<'PY' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(60)
PY
PIDS="$PIDS $!"
for i in $(seq 100); do [ -s "$WORK/taken.port" ] && break; sleep 0.05; done
port=$(cat "$WORK/taken.port")
run_case taken PPROF_ADDR="127.0.0.1:$port"
lines=$(grep -c '^pprofagent:' "$WORK/taken.err" || true)
[ "$lines" = 1 ] || { cat "$WORK/taken.err"; fail "port clash printed $lines agent lines, expected 1"; }
grep -q "cannot serve on 127.0.0.1:$port" "$WORK/taken.err" || fail "port clash message"
[ "$(wc -l < "$WORK/taken.err")" = 2 ] || fail "extra stderr output on port clash"

# Off and disabled: not a word.
run_case off PPROF_ADDR=off
[ "$(cat "$WORK/off.err")" = err-line ] || fail "PPROF_ADDR=off printed something"
run_case disabled PPROF_ENABLE=0 PPROF_ADDR=127.0.0.1:0
[ "$(cat "$WORK/disabled.err")" = err-line ] || fail "PPROF_ENABLE=0 printed something"

# Bad values: one line each, naming variable, value and what is accepted.
run_case bad PPROF_ADDR=off PPROF_CPU_HZ=fast PPROF_HEAP_RATE=-5 PPROF_LOG=loud PPROF_ENABLE=yes
cat "$WORK/bad.err"
grep -q 'PPROF_CPU_HZ="fast" is not an integer in \[1, 10000\]; using 100' "$WORK/bad.err" || fail "PPROF_CPU_HZ message"
grep -q 'PPROF_HEAP_RATE="-5"' "$WORK/bad.err" || fail "PPROF_HEAP_RATE message"
grep -q 'PPROF_LOG="loud" is not quiet, info or debug' "$WORK/bad.err" || fail "PPROF_LOG message"
grep -q 'PPROF_ENABLE="yes" is not 0 or 1' "$WORK/bad.err" || fail "PPROF_ENABLE message"
[ "$(grep -c '^pprofagent:' "$WORK/bad.err")" = 4 ] || fail "not one line per bad value"

run_case badaddr PPROF_ADDR=nonsense
grep -q 'PPROF_ADDR="nonsense" is not host:port' "$WORK/badaddr.err" || fail "PPROF_ADDR message"

# A non-loopback address without a token is refused, with a reason.
run_case open PPROF_ADDR=0.0.0.0:0
grep -q 'refusing to serve on 0.0.0.0:0 without PPROF_TOKEN' "$WORK/open.err" || fail "non-loopback refusal"

# Quiet silences the agent entirely.
run_case quiet PPROF_LOG=quiet PPROF_ADDR="127.0.0.1:$port"
[ "$(cat "$WORK/quiet.err")" = err-line ] || fail "PPROF_LOG=quiet still printed"
echo ok
