# Shared helpers for integration tests: start a real program under the agent
# on a free loopback port, fetch endpoints, read profiles with go tool pprof.
# Sourced by test/integration/*.sh, which run with BUILD, AGENT and TOP set.
set -eu

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-test.XXXXXX")
export PPROF_TMPDIR="$WORK/pprof"   # where go tool pprof saves fetched copies
export HOME="${HOME:-$WORK}"
# Every test announces its serving processes in a folder of its own, so a
# process list never shows another test's (or another program's) agents.
export PPROF_RUN_DIR="$WORK/run"
PIDS=""

cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "# $*"; }

# The Go toolchain the tests read profiles and traces with: the newest one
# on the machine (a current release beside Debian's golang-go, whose pprof
# and trace are years old), first on PATH for every `go` below. GO names
# another one.
for g in "${GO:-}" /usr/local/go/bin/go "$(command -v go || true)"; do
    if [ -n "$g" ] && [ -x "$g" ]; then GO=$g; break; fi
done
[ -n "${GO:-}" ] || fail "no go toolchain found (install golang-go or set GO)"
PATH="$(dirname "$GO"):$PATH"
export GO PATH
GO_VERSION=$("$GO" env GOVERSION 2>/dev/null || echo unknown)
note "go: $GO ($GO_VERSION)"
# Its pprof: since Go 1.24 `go tool pprof` builds the tool once into the
# build cache and, on every call, first works out where (about 0.3 s of
# CPU a call, a few hundred calls a suite). `go tool -n` says where (0.5 s
# of CPU), once for this Go in this build tree ($BUILD/go-pprof: the Go,
# its version, the binary); the tests then run that same binary.
PPROF_BIN=$(awk -v g="$GO" -v v="$GO_VERSION" '$1 == g && $2 == v { print $3 }' "$BUILD/go-pprof" 2>/dev/null || true)
if [ -z "$PPROF_BIN" ] || [ ! -x "$PPROF_BIN" ]; then
    PPROF_BIN=$("$GO" tool -n pprof 2>/dev/null | tail -n 1 || true)
    [ -n "$PPROF_BIN" ] && [ -x "$PPROF_BIN" ] || PPROF_BIN=""
    [ -z "$PPROF_BIN" ] || { echo "$GO $GO_VERSION $PPROF_BIN" >"$BUILD/go-pprof.$$" &&
        mv "$BUILD/go-pprof.$$" "$BUILD/go-pprof"; } 2>/dev/null || true
fi

# need_go MINOR: fails unless $GO is Go 1.MINOR or later (go tool trace
# reads only its own release's trace format).
need_go() {
    _v=$("$GO" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
    [ -n "$_v" ] && [ "$_v" -ge "$1" ] ||
        fail "no Go 1.$1 or later found (the trace is in Go 1.$1's format; Debian's go 1.19 reads only the old one): install /usr/local/go"
}

# wait_until WHAT CMD...: waits for a state instead of looking once: runs
# CMD every 0.1 s until it succeeds; after 60 s (a machine loaded far
# beyond the suite's own load) fails with WHAT.
wait_until() {
    what=$1; shift
    _w=0
    until "$@"; do
        _w=$((_w + 1)); [ $_w -lt 600 ] || fail "waited 60 s: $what"
        sleep 0.1
    done
}

# start_agent NAME CMD...: starts CMD under the agent with PPROF_ADDR on port
# 0; sets PID and ADDR (host:port) once the server listens. Extra PPROF_*
# variables can be exported by the caller first. stdout/stderr of the program
# go to $WORK/NAME.out and $WORK/NAME.err.
start_agent() {
    name=$1; shift
    portfile="$WORK/$name.port"
    rm -f "$portfile"
    # "env VAR=VALUE... CMD": the variables go on the outer env instead, so
    # that an intermediate env does not load the agent and write the port
    # file before exec'ing the program (a stale port the test would read).
    case "${1:-}=${2:-}" in env=*=*) shift ;; esac
    env LD_PRELOAD="$AGENT" PPROF_ADDR="${PPROF_ADDR:-127.0.0.1:0}" \
        PPROF_PORT_FILE="$portfile" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    PID=$!
    PIDS="$PIDS $PID"
    i=0
    # Read, not only tested: a wrapper that execs the program (python3 as
    # a pyenv shim) serves first, and the program's agent removes the
    # wrapper's file before it writes its own (docs/operations.md).
    until ADDR=$(cat "$portfile" 2>/dev/null) && [ -n "$ADDR" ]; do
        i=$((i + 1))
        if [ $i -gt 200 ]; then
            cat "$WORK/$name.err" >&2
            fail "$name: the agent did not write $portfile within 10 s"
        fi
        kill -0 "$PID" 2>/dev/null || { cat "$WORK/$name.err" >&2; fail "$name exited early"; }
        sleep 0.05
    done
    note "$name pid $PID serving on $ADDR"
}

# stop PID: ends a program started by start_agent and waits for it.
# host_figures NAME KEY: asks the program started as NAME (PID) for the
# figures it measured of itself: sends SIGUSR1, waits (up to 5 s) for a new
# line "KEY=N other=N ..." in $WORK/NAME.out and prints its numbers ("N N ...").
host_figures() {
    n=$(grep -c "^$2=" "$WORK/$1.out" || true)
    kill -USR1 "$PID"
    for i in $(seq 100); do
        [ "$(grep -c "^$2=" "$WORK/$1.out" || true)" -gt "$n" ] && break
        sleep 0.05
    done
    grep "^$2=" "$WORK/$1.out" | tail -n 1 | sed 's/[a-z_]*=//g'
}

stop() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# stacks PID: the stacks of a process's threads, from gdb, on stderr.
stacks() {
    gdb -p "$1" -batch -ex 'thread apply all bt' 2>/dev/null | grep '^#\|^Thread' >&2 || true
}

# wait_exit PID SECS: waits for a program started by start_agent to end and
# sets STATUS to its exit status. One still running after SECS is stuck: the
# stacks of its threads are printed (from gdb) and the test fails at once
# rather than at the runner's time limit.
wait_exit() {
    i=0
    while :; do
        state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
        [ -n "$state" ] && [ "$state" != Z ] || break
        i=$((i + 1))
        if [ $i -gt $(($2 * 10)) ]; then
            stacks "$1"
            fail "pid $1 still running after $2 s"
        fi
        sleep 0.1
    done
    if wait "$1"; then STATUS=0; else STATUS=$?; fi
}

# fetch PATH [curl args...]: GET http://$ADDR/PATH, body to stdout; fails
# the test on a transport error (HTTP errors are the caller's to check).
fetch() {
    path=$1; shift
    curl -sS --max-time 120 "$@" "http://$ADDR/$path"
}

# http_status PATH: the status code only.
http_status() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 60 "http://$ADDR/$1"
}

# pprof ARGS...: go tool pprof with output captured; fails on error.
pprof() {
    if [ -n "$PPROF_BIN" ]; then
        "$PPROF_BIN" "$@" 2>"$WORK/pprof.err" || { cat "$WORK/pprof.err" >&2; fail "go tool pprof $*"; }
    else
        go tool pprof "$@" 2>"$WORK/pprof.err" || { cat "$WORK/pprof.err" >&2; fail "go tool pprof $*"; }
    fi
}

# top_cum TOP FUNCTION: the cum column of FUNCTION's row in `pprof -top
# -cum` output TOP, without its unit (the caller picks it with -unit).
top_cum() {
    printf '%s\n' "$1" | awk -v f="$2" '$NF == f {v = $4; sub(/[a-z]+$/, "", v); print v + 0; exit}'
}

# flat_ms TOP FUNCTION: the flat column of FUNCTION's row in `pprof -top
# -unit=ms` output TOP, without its unit.
flat_ms() {
    printf '%s\n' "$1" | awk -v f="$2" '$NF == f { v = $1; sub(/ms$/, "", v); print v; exit }'
}

# within PERCENT GOT WANT WHAT: GOT (ms, from a profile) is within PERCENT
# of WANT (ms, what the program measured of itself), or the test fails.
within() {
    awk -v p="$1" -v g="$2" -v w="$3" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(g != "" && w > 0 && d <= w * p / 100) }' ||
        fail "$4: ${2:-nothing} ms in the profile, the program measured $3 ms (more than $1% apart)"
    note "$4: $2 ms in the profile, the program measured $3 ms"
}

# trace_top KIND: `pprof -top -unit=ms` of the KIND blocking profile
# (go tool trace -pprof=KIND) of $WORK/trace; the test fails when go tool
# trace cannot make it. Call it as top=$(trace_top KIND) || exit 1.
trace_top() {
    "$GO" tool trace -pprof="$1" "$WORK/trace" >"$WORK/$1.pb" 2>"$WORK/$1.err" ||
        { cat "$WORK/$1.err" >&2; fail "go tool trace -pprof=$1"; }
    "$GO" tool pprof -top -unit=ms "$WORK/$1.pb" 2>/dev/null
}

# trace_ui TRACE: serves TRACE with go tool trace -http; sets url, and ui
# to its pid.
trace_ui() {
    "$GO" tool trace -http=127.0.0.1:0 "$1" >"$WORK/ui.log" 2>&1 &
    ui=$!
    PIDS="$PIDS $ui"
    for i in $(seq 600); do grep -q 'listening on' "$WORK/ui.log" && break; sleep 0.1; done
    url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$WORK/ui.log")
    [ -n "$url" ] || { cat "$WORK/ui.log"; fail "go tool trace did not serve"; }
}

# browser ARGS... URL: headless Chromium (each run with a profile of its
# own), what it prints (the DOM after its scripts, with --dump-dom) on stdout.
n_browser=0
browser() {
    n_browser=$((n_browser + 1))
    timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-quic \
        --no-first-run --disable-background-networking \
        --disable-component-update --disable-sync --disable-dev-shm-usage \
        --user-data-dir="$WORK/chrome-$n_browser" "$@" 2>"$WORK/chrome-$n_browser.err" \
        || { tail -n 20 "$WORK/chrome-$n_browser.err" >&2; fail "chromium $*"; }
}

# profile_seconds FILE: the profile's duration in seconds.
profile_seconds() {
    pprof -raw "$1" | sed -n 's/^Duration: \([0-9.]*\).*/\1/p' | head -n 1
}

# idlers_check FILE THREADS SHARE_POINTS TOTAL_OFF: the wall profile FILE
# of test/programs/idle_threads: each of the four waits gets 25% of the
# idlers' time within SHARE_POINTS, and their total is THREADS x the
# profile's duration within the fraction TOTAL_OFF.
idlers_check() {
    top=$(pprof -top -cum -unit=s -sample_index=wall -focus='^idler$' "$1")
    echo "$top" | head -n 12
    secs=$(profile_seconds "$1")
    pt=$(top_cum "$top" idler)
    [ -n "$pt" ] && [ -n "$secs" ] || fail "idler or the duration missing from the wall profile"
    awk -v t="$pt" -v d="$secs" -v n="$2" -v pts="$3" -v off="$4" -v c="$(top_cum "$top" idle_cond)" \
        -v s="$(top_cum "$top" idle_sleep)" -v e="$(top_cum "$top" idle_epoll)" -v p="$(top_cum "$top" idle_poll)" '
    function check(name, v) {
        share = v / t * 100; d0 = share - 25; if (d0 < 0) d0 = -d0
        printf "# %-10s %5.1f%% of the idlers (25%% expected)\n", name, share
        if (d0 > pts) bad = 1
    }
    BEGIN {
        check("idle_cond", c); check("idle_sleep", s); check("idle_epoll", e); check("idle_poll", p)
        r = t / (n * d)
        printf "# idlers: %.0f s charged for %d x %.2f s (%.3f)\n", t, n, d, r
        if (r < 1 - off || r > 1 + off) bad = 1
        exit bad
    }' || fail "the idlers' wall time is not whole, or not shared as they wait"
}

# expect_contains TEXT NEEDLE [WHAT]
expect_contains() {
    case "$1" in
        *"$2"*) ;;
        *) printf '%s\n' "$1" | head -n 40 >&2; fail "${3:-output} lacks '$2'";;
    esac
}

# expect_not_contains TEXT NEEDLE [WHAT]
expect_not_contains() {
    case "$1" in
        *"$2"*) printf '%s\n' "$1" | head -n 40 >&2; fail "${3:-output} contains '$2'";;
        *) ;;
    esac
}

# profile_note KIND: the agent's note on its last profile of KIND (cpu,
# wall, heap, peak), from /debug/stats (profiles carry no such comment).
profile_note() {
    fetch debug/stats | python3 -c 'import json, sys; print(json.load(sys.stdin)["profile_notes"].get(sys.argv[1], ""))' "$1"
}

# attach_target_start: ATTACH (pprof-attach), and test/programs/attach_target
# started without the agent as PID (it stops when STOPFILE exists), once it
# says it started.
attach_target_start() {
    ATTACH="$BUILD/pprof-attach"
    [ -x "$ATTACH" ] || fail "no $ATTACH (make test-bins builds it)"
    STOPFILE="$WORK/stop"
    "$BUILD/test/programs/attach_target" "$STOPFILE" >"$WORK/target.out" 2>"$WORK/target.err" &
    PID=$!
    PIDS="$PIDS $PID"
    wait_until "the target to start" grep -q started "$WORK/target.out"
}

# profile_against_clock TID NAME: a CPU profile of PID (at ADDR) into
# WORK/cpu.pb.gz, and in want the CPU thread TID (called NAME) used over
# the profile's window, in ms. The thread's CPU (/proc, 10 ms ticks) is
# read every 0.1 s while the profile is fetched, and taken at the
# profile's own start and end (its Time and Duration): on a loaded
# machine the fetch's wall time is seconds longer than the profile. The
# profile is taken longer until it holds at least 3 s of the thread's CPU.
profile_against_clock() {
    hz=$(getconf CLK_TCK)
    secs=8
    for try in 1 2 3; do
        (while :; do
            echo "$(date +%s%N) $(awk '{print $14 + $15}' "/proc/$PID/task/$1/stat")"
            sleep 0.1
        done) >"$WORK/ticks" &
        ticker=$!
        fetch "debug/pprof/profile?seconds=$secs" >"$WORK/cpu.pb.gz"
        sleep 0.3
        kill "$ticker"; wait "$ticker" 2>/dev/null || true
        raw=$(pprof -raw "$WORK/cpu.pb.gz")
        start=$(printf '%s\n' "$raw" | sed -n 's/^Time: //p' | head -n 1)
        start_ns=$(date -d "${start% UTC}" +%s%N)
        dur=$(printf '%s\n' "$raw" | sed -n 's/^Duration: \([0-9.]*\)s*.*/\1/p' | head -n 1)
        want=$(awk -v s="$start_ns" -v d="$dur" -v hz="$hz" '
            function at(t,   i) { # ticks at time t, interpolated
                for (i = 2; i <= n; i++) if (T[i] >= t)
                    return K[i-1] + (K[i] - K[i-1]) * (t - T[i-1]) / (T[i] - T[i-1])
                return K[n] }
            { n++; T[n] = $1; K[n] = $2 }
            END { e = s + d * 1e9; printf "%d", (at(e) - at(s)) * 1000 / hz }' "$WORK/ticks")
        note "profile $dur s; the $2 thread's clock: $want ms over it"
        [ "$want" -ge 3000 ] && break
        secs=$((secs * 2))
    done
}

# redis_under_benchmark: Debian's redis-server started without the agent
# as PID on port (and answering), and redis-benchmark as B looping SET and
# GET on it with 20 clients until the test ends it (its output in
# WORK/bench.out: what counts is that it saw no error), once connected.
redis_under_benchmark() {
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
        >"$WORK/redis.out" 2>&1 &
    PID=$!
    PIDS="$PIDS $PID"
    wait_until "redis to answer" sh -c "redis-cli -p $port ping 2>/dev/null | grep -q PONG"
    redis-benchmark -p "$port" -q -n 100000000 -t set,get -c 20 -l \
        >"$WORK/bench.out" 2>&1 &
    B=$!
    PIDS="$PIDS $B"
    wait_until "the benchmark to connect" redis_busy
}

# redis_busy: more than 5 clients are connected to the redis on port.
redis_busy() {
    n=$(redis-cli -p "$port" info clients | sed -n 's/^connected_clients:\([0-9]*\).*/\1/p')
    [ "${n:-0}" -gt 5 ]
}

# stop_summary FILE WHAT: the stop times pprof-attach printed into FILE,
# for attaches and for detaches: min, median, max, and how many (WHAT).
stop_summary() {
    for kind in attached detached; do
        sed -n "s/.*$kind [a-z]* pid [0-9]*; thread [0-9]* stopped \([0-9.]*\) ms.*/\1/p" "$1" |
            sort -n | awk -v k="$kind" -v what="$2" '{a[NR] = $1}
                END { printf "# stop when %s: min %s ms, median %s ms, max %s ms (%d %s)\n",
                      k, a[1], a[int(NR / 2) + 1], a[NR], NR, what }'
    done
}

# ---- the tests' OpenTelemetry Collector (test/collector) ----------------

# collector_prepare: builds the Collector once (COL) and READ, the reader of
# what it recorded (test/collector/otlp_read.py).
collector_prepare() {
    sh "$TOP/test/collector/build" "$BUILD"
    COL="$BUILD/test/collector/otelcol"
    READ="python3 $TOP/test/collector/otlp_read.py"
}

# free_port: a loopback port free now.
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# collector_config PORT FILE [TLS]: the Collector's configuration: OTLP/HTTP
# on PORT (with WORK/srv.crt and srv.key when TLS), what it receives
# recorded into FILE.
collector_config() {
    {
        printf 'receivers:\n  otlp:\n    protocols:\n      http:\n'
        printf '        endpoint: 127.0.0.1:%s\n' "$1"
        [ -z "${3:-}" ] || printf '        tls:\n          cert_file: %s/srv.crt\n          key_file: %s/srv.key\n' "$WORK" "$WORK"
        printf 'exporters:\n  record:\n    path: %s\n' "$2"
        printf 'service:\n  telemetry:\n    metrics:\n      level: none\n'
        printf '  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [record]\n'
    } >"$WORK/collector.yaml"
}

# start_collector: starts the Collector as configured (CPID), once ready.
start_collector() {
    : >"$WORK/collector.log"
    "$COL" --config="file:$WORK/collector.yaml" \
        --feature-gates=+service.profilesSupport >"$WORK/collector.log" 2>&1 &
    CPID=$!
    PIDS="$PIDS $CPID"
    end=$(($(date +%s) + 60))
    while [ "$(date +%s)" -le "$end" ]; do
        grep -q "Everything is ready" "$WORK/collector.log" && return 0
        kill -0 "$CPID" 2>/dev/null || break
        sleep 0.1
    done
    cat "$WORK/collector.log" >&2
    fail "the Collector did not start"
}

# requests PID: how many requests of PID the Collector recorded in GOT (one
# a line; process.pid is the resource's only integer attribute).
requests() {
    [ -s "$GOT" ] || { echo 0; return; }
    cut -c1-2000 "$GOT" | grep -c "^{\"resourceProfiles\":\[{\"resource\":{\"attributes\":\[[^]]*\"intValue\":\"$1\"" || true
}

# at_least MIN SECS CMD...: until the number CMD prints reaches MIN;
# 1 when it has not within SECS.
at_least() {
    _min=$1; _end=$(($(date +%s) + $2)); shift 2
    while [ "$(date +%s)" -le "$_end" ]; do
        [ "$("$@")" -ge "$_min" ] && return 0
        sleep 0.1
    done
    return 1
}

# wait_requests PID MIN SECS: until GOT holds MIN requests of PID.
wait_requests() {
    at_least "$2" "$3" requests "$1" ||
        fail "the Collector got fewer than $2 requests of pid $1 within $3 s"
}
