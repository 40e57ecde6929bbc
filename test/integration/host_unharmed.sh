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

# run_held NAME ENV...: a host that lives 2 s, past the server's start,
# prints "done" and returns 0.
run_held() {
    name=$1; shift
    set +e
    env LD_PRELOAD="$AGENT" "$@" "$BUILD/test/programs/batch_job" wait 0 2 \
        >"$WORK/$name.out" 2>"$WORK/$name.err"
    status=$?
    set -e
    [ "$status" = 0 ] || fail "$name: exit status $status, expected 0"
    [ "$(cat "$WORK/$name.out")" = done ] || fail "$name: stdout changed"
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
# The process lives past the server's start: one line names the cause and
# where it serves instead (port 0, found in the run directory).
run_held taken PPROF_ADDR="127.0.0.1:$port"
lines=$(grep -c '^pprofagent:' "$WORK/taken.err" || true)
[ "$lines" = 1 ] || { cat "$WORK/taken.err"; fail "port clash printed $lines agent lines, expected 1"; }
grep -q "^pprofagent: cannot serve on 127.0.0.1:$port (Address already in use); serving http://127.0.0.1:[0-9]*/debug/pprof/ instead (pid [0-9]*)\$" \
    "$WORK/taken.err" || { cat "$WORK/taken.err"; fail "port clash message"; }
[ "$(wc -l < "$WORK/taken.err")" = 1 ] || fail "extra stderr output on port clash"
# Without a run directory to be found in, nothing is served, with the cause.
run_held taken_norun PPROF_ADDR="127.0.0.1:$port" PPROF_RUN_DIR=off
grep -qx "pprofagent: cannot serve on 127.0.0.1:$port: Address already in use; profiling endpoints are off" \
    "$WORK/taken_norun.err" || { cat "$WORK/taken_norun.err"; fail "port clash message without a run directory"; }
# A process that ends before the server would start says nothing.
run_case short PPROF_ADDR="127.0.0.1:$port"
[ "$(cat "$WORK/short.err")" = err-line ] || { cat "$WORK/short.err"; fail "a short-lived process printed something"; }

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

# The same class of misreading in every other setting: another case,
# trailing characters, units, a missing part. One line each, naming the
# variable and the value.
run_case bad2 PPROF_ADDR=off PPROF_LOG=DEBUG PPROF_CHILDREN=Serve PPROF_ENABLE="1 " \
    PPROF_DUMP_SIGNAL=usr1 PPROF_RUN_DIR=OFF PPROF_HEAP_RATE=512k PPROF_MUTEX_FRACTION=" 5" \
    PPROF_BLOCK_RATE=1e5 PPROF_DUMP_INTERVAL=10s PPROF_CPU_HZ=100Hz PPROF_DEBUG_DIR=debug \
    PPROF_START_DELAY_MS=-1 PPROF_WALL_HZ=+20
for v in 'PPROF_LOG="DEBUG"' 'PPROF_CHILDREN="Serve"' 'PPROF_ENABLE="1 "' 'PPROF_DUMP_SIGNAL="usr1"' \
    'PPROF_RUN_DIR="OFF"' 'PPROF_HEAP_RATE="512k"' 'PPROF_MUTEX_FRACTION=" 5"' 'PPROF_BLOCK_RATE="1e5"' \
    'PPROF_DUMP_INTERVAL="10s"' 'PPROF_CPU_HZ="100Hz"' 'PPROF_DEBUG_DIR="debug"' 'PPROF_START_DELAY_MS="-1"' \
    'PPROF_WALL_HZ="+20"'; do
    [ "$(grep -cF "pprofagent: $v" "$WORK/bad2.err")" = 1 ] || { cat "$WORK/bad2.err"; fail "no single line for $v"; }
done
[ "$(grep -c '^pprofagent:' "$WORK/bad2.err")" = 13 ] || { cat "$WORK/bad2.err"; fail "not one line per bad value"; }

run_case badaddr PPROF_ADDR=nonsense
grep -q 'PPROF_ADDR="nonsense" is not host:port' "$WORK/badaddr.err" || fail "PPROF_ADDR message"

# A mistyped address is refused, never read as the default (a server on
# 127.0.0.1:6060 nobody asked for): one line, no port file, no socket. The
# hosts live past the server's start, all at once.
i=0
for a in OFF Off 0.0.0.0 127.0.0.1 127.0.0.1:6060x '127.0.0.1:+7000' '127.0.0.1:-0' \
    '127.0.0.1: 7000' ' 127.0.0.1:7000' 127.1:7000 999.0.0.1:7000 '[::1:0' '[::zz]:0' \
    localhost:65536 'unix:/tmp/x'; do
    i=$((i + 1))
    printf '%s' "$a" > "$WORK/addr$i.value"
    run_held addr$i PPROF_ADDR="$a" PPROF_PORT_FILE="$WORK/addr$i.port" &
    eval "held_$i=\$!"
done
for n in $(seq $i); do
    eval "wait \$held_$n" || fail "host with PPROF_ADDR=$(cat "$WORK/addr$n.value") failed"
    a=$(cat "$WORK/addr$n.value")
    [ ! -e "$WORK/addr$n.port" ] || fail "PPROF_ADDR=\"$a\" served on $(cat "$WORK/addr$n.port")"
    [ "$(grep -c '^pprofagent:' "$WORK/addr$n.err")" = 1 ] ||
        { cat "$WORK/addr$n.err"; fail "PPROF_ADDR=\"$a\": not one line"; }
    grep -qF "PPROF_ADDR=\"$a\"" "$WORK/addr$n.err" && grep -q "profiling endpoints are off\$" "$WORK/addr$n.err" ||
        { cat "$WORK/addr$n.err"; fail "PPROF_ADDR=\"$a\": no refusal naming the value"; }
done
# Host names are not case-sensitive.
run_held upper PPROF_ADDR=LOCALHOST:0 PPROF_PORT_FILE="$WORK/upper.port"
grep -q '^127.0.0.1:[0-9]*$' "$WORK/upper.port" || { cat "$WORK/upper.err"; fail "LOCALHOST:0 not served"; }
run_case delay PPROF_START_DELAY_MS=1s
grep -q 'PPROF_START_DELAY_MS="1s" is not an integer in \[0, 600000\]; using 1000' "$WORK/delay.err" ||
    fail "PPROF_START_DELAY_MS message"

# A non-loopback address without a token is refused, with a reason.
run_case open PPROF_ADDR=0.0.0.0:0
grep -q 'refusing to serve on 0.0.0.0:0 without PPROF_TOKEN' "$WORK/open.err" || fail "non-loopback refusal"

# Quiet silences the agent entirely.
run_held quiet PPROF_LOG=quiet PPROF_ADDR="127.0.0.1:$port"
[ ! -s "$WORK/quiet.err" ] || fail "PPROF_LOG=quiet still printed"
echo ok
