# Programs that take their descriptors back, as daemons do (agent/host/fds.c,
# docs/descriptors.md):
# - fd_reuse closes every inherited descriptor (a loop, closefrom,
#   close_range), reuses the numbers (a pipe on 3/4, threads whose creation
#   the agent records, a file copy, 200,000 records, a fork, its own TCP
#   listener) and dup2s onto every number that was open: every byte must
#   come back in order and the program end in time, with the defaults,
#   with PPROF_ADDR=off, with heap samples at a high rate, and with dumps;
# - fd_takeover closes or replaces the agent's descriptors, or uses up the
#   descriptor limit while a client waits on the agent's port, then idles:
#   the idle process must use (almost) no CPU, and the agent must answer
#   again once descriptors are free.
. "$TOP/test/integration/lib.sh"

REUSE="$BUILD/test/programs/fd_reuse"
TAKEOVER="$BUILD/test/programs/fd_takeover"
TICKS=$(getconf CLK_TCK)

# reuse NAME MODE [VAR=VALUE...]: runs fd_reuse under the agent.
reuse() {
    name=$1; mode=$2; shift 2
    mkdir -p "$WORK/$name"
    env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 \
        PPROF_PORT_FILE="$WORK/$name/port" "$@" \
        "$REUSE" "$mode" "$WORK/$name" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    PID=$!
    PIDS="$PIDS $PID"
    wait_exit "$PID" 60
    if [ "$STATUS" != 0 ] || ! grep -q '^fd_reuse ok' "$WORK/$name.out"; then
        cat "$WORK/$name.out" "$WORK/$name.err" >&2
        fail "$name: exit status $STATUS"
    fi
    note "$name: $(cat "$WORK/$name.out")"
}

for mode in loop closefrom close_range; do
    reuse "default-$mode" "$mode"
    reuse "off-$mode" "$mode" PPROF_ADDR=off
    reuse "heap-$mode" "$mode" PPROF_HEAP_RATE=512
done
# The dump thread's wake pipe and the run-directory file were replaced by
# dup2 and moved: the exit dump still lands in its folder.
reuse dump loop PPROF_DUMP_DIR="$WORK/dumps" PPROF_HEAP_RATE=4096
ls "$WORK/dumps" | grep -q '\.heap\.pb\.gz$' || fail "no heap dump at exit"
ls "$WORK/dumps" | grep -q '\.cpu\.pb\.gz$' || fail "no CPU dump at exit"
# Without the agent the program passes too (the test checks the program).
mkdir -p "$WORK/plain"
timeout 60 "$REUSE" loop "$WORK/plain" >"$WORK/plain.out" 2>&1 ||
    { cat "$WORK/plain.out" >&2; fail "fd_reuse fails without the agent"; }

# cpu_ticks PID: user + system time of the process, in clock ticks.
cpu_ticks() {
    sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}

# takeover NAME MODE: starts fd_takeover under the agent, its server
# listening from the constructor on (not after PPROF_START_DELAY_MS), so
# the program takes over what the agent already holds; waits for "ready"
# and sets PID.
takeover() {
    name=$1; mode=$2
    mkdir -p "$WORK/$name"
    PPROF_START_DELAY_MS=0 start_agent "$name" "$TAKEOVER" "$mode" "$WORK/$name"
    i=0
    until grep -q ready "$WORK/$name.out"; do
        i=$((i + 1)); [ $i -lt 200 ] || fail "$name: not ready"
        sleep 0.05
    done
}

# idle_cpu PID SECS: CPU ticks the process used over SECS seconds.
idle_cpu() {
    a=$(cpu_ticks "$1"); sleep "$2"; b=$(cpu_ticks "$1")
    echo $((b - a))
}

# A limit the programs can reach quickly.
ulimit -n 1024

# Closing: refused, the agent keeps its listener and answers.
takeover closed close
[ "$(http_status debug/pprof/cmdline)" = 200 ] ||
    fail "the agent stopped answering after the program closed its descriptors"
used=$(idle_cpu "$PID" 3)
note "closed: $used ticks of CPU over 3 idle seconds ($TICKS per second)"
[ "$used" -le $((TICKS / 5)) ] || fail "closed: the idle process used $used ticks in 3 s"
touch "$WORK/closed/go"; wait_exit "$PID" 20

# Replaced: the listener is given up, without spinning.
takeover replaced dup2
curl -s -o /dev/null --max-time 2 "http://$ADDR/debug/pprof/" || true
used=$(idle_cpu "$PID" 3)
note "replaced: $used ticks of CPU over 3 idle seconds"
[ "$used" -le $((TICKS / 5)) ] || fail "replaced: the idle process used $used ticks in 3 s"
touch "$WORK/replaced/go"; wait_exit "$PID" 20

# Exhausted: a client waits on the agent's port while the program holds
# every descriptor; no spinning, and an answer once some are free.
takeover exhausted exhaust
note "$(head -n 1 "$WORK/exhausted.out")"
curl -s -o "$WORK/exhausted.body" -w '%{http_code}' --max-time 30 \
    "http://$ADDR/debug/pprof/cmdline" >"$WORK/exhausted.code" &
CURL=$!
sleep 0.5
used=$(idle_cpu "$PID" 3)
note "exhausted: $used ticks of CPU over 3 idle seconds with a client waiting"
[ "$used" -le $((TICKS / 5)) ] || fail "exhausted: the idle process used $used ticks in 3 s"
touch "$WORK/exhausted/go"
wait "$CURL" || true
[ "$(cat "$WORK/exhausted.code")" = 200 ] ||
    fail "exhausted: the waiting client got '$(cat "$WORK/exhausted.code")' once descriptors were free"
grep -q fd_takeover "$WORK/exhausted.body" || fail "exhausted: wrong body"
touch "$WORK/exhausted/stop"; wait_exit "$PID" 20
echo ok
