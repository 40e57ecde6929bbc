#!/bin/sh
# The agent's cost on real services, as CPU per request: redis-server under
# redis-benchmark, nginx (master and 1 worker) under wrk, PostgreSQL under
# pgbench. The service's processes, and only they, run in a cgroup of their
# own (cgroup v1 cpuacct, else cgroup v2 cpu.stat; else the sum of
# utime+stime, children's included, of the service's process tree from
# /proc); its CPU is read before and after a load of SECONDS, and divided
# by the requests the load generator completed (every one checked: an
# error fails the row). Configurations, interleaved round by round:
#
#   none      no agent
#   defaults  the agent serving, nothing requested (heap, mutex, block on)
#   push15    PPROF_PUSH=otlp to the test Collector every 15 s (the load
#   push5     window is one interval long and starts after the first push)
#   cpu       a CPU profile of every serving process over the load
#   wall      a wall profile of every serving process over the load
#   trace     an execution trace of every serving process over the load
#   flight    the flight recorder on (PPROF_TRACE_FLIGHT=2)
#
# Each row prints the CPU seconds per million requests (median), the ratio
# to "none" of the same round (median, min..max), the goal and a verdict
# (not met only when the median misses the goal by more than the spread of
# the no-agent rounds themselves), and the agent's own threads' share of
# the service's CPU (their schedstat). A row that could not be measured
# fails the area by name.
#
#   sh test/bench/services.sh BUILD_DIR
# Environment: SERVICES_ROUNDS (5), SERVICES_SECONDS (5), SERVICES (redis
# nginx postgres), SERVICES_CONFIGS (all of the above), SERVICES_CPU
# (cpuacct, cgroup2 or proc: force a method), SERVICES_DEBUG (each step
# timed on stderr).
set -eu
build=$(cd "$1" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/bench/stats.sh"
rounds=${SERVICES_ROUNDS:-5}
secs=${SERVICES_SECONDS:-5}
services=${SERVICES:-redis nginx postgres}
configs=${SERVICES_CONFIGS:-none defaults push15 push5 cpu wall trace flight}
agent="$build/libpprofagent.so"
work=$(mktemp -d)
chmod 755 "$work"
SVC=""
GRP=""
cleanup() {
    [ -z "$SVC" ] || kill -9 "$SVC" 2>/dev/null || true
    for p in $(cat "$work/bg" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    [ -z "$GRP" ] || { for p in $(cat "$GRP/cgroup.procs" 2>/dev/null); do kill -9 "$p"; done; sleep 0.2; rmdir "$GRP"; } 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
: >"$work/failed"
: >"$work/data"

. "$top/test/bench/services_cpu.sh"
. "$top/test/bench/services_svc.sh"

# fail_row SERVICE CONFIG WHY: the row is not measured (nor in later
# rounds); the area fails at the end, naming it.
fail_row() {
    echo "$1 $2: $3" >>"$work/failed"
    echo "services: cannot measure $1 $2: $3"
}
# failed SERVICE CONFIG: the row is already known not to be measurable
# (itself, its service, the push rows' Collector).
failed() {
    grep -q "^$1 $2:\\|^$1 all:" "$work/failed" && return 0
    case $2 in push*) grep -q "^all push:" "$work/failed" ;; *) return 1 ;; esac
}

# setup_collector: the test Collector (test/collector, built from its
# pinned Go module) on a free port, recording to a file; CPORT.
setup_collector() {
    sh "$top/test/collector/build" "$build" >"$work/colbuild.log" 2>&1 || return 1
    CPORT=$(free_port)
    printf 'receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%s\nexporters:\n  record:\n    path: %s/got.jsonl\nservice:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [record]\n' \
        "$CPORT" "$work" >"$work/col.yaml"
    "$build/test/collector/otelcol" --config="file:$work/col.yaml" \
        --feature-gates=+service.profilesSupport >"$work/col.log" 2>&1 &
    echo $! >>"$work/bg"
    until_ok 60 grep -q "Everything is ready" "$work/col.log"
}

# cfg_env CONFIG RUNDIR: the variables CONFIG runs the service with.
cfg_env() {
    base="LD_PRELOAD=$agent PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE=$2/port PPROF_RUN_DIR=$2/run PPROF_LOG=quiet"
    push="$base PPROF_PUSH=otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:${CPORT:-0}"
    case $1 in
    none) echo "PPROF_ENABLE=1" ;; # no LD_PRELOAD: the agent is not there
    push15) echo "$push PPROF_PUSH_INTERVAL=15" ;;
    push5) echo "$push PPROF_PUSH_INTERVAL=5" ;;
    flight) echo "$base PPROF_TRACE_FLIGHT=2" ;;
    *) echo "$base" ;;
    esac
}

# window CONFIG: seconds of load; a push's is one interval.
window() { case $1 in push15) echo 15 ;; push5) echo 5 ;; *) echo "$secs" ;; esac; }

# addrs RUNDIR: "pid address" of every process announced there.
addrs() { for f in "$1"/run/pid-*; do [ -f "$f" ] && echo "${f##*/pid-} $(awk '{print $5}' "$f")"; done; }

# pushed RUNDIR: every announced process has sent a push at least once.
pushed() {
    addrs "$1" | while read -r p a; do
        n=$(curl -s --max-time 5 "http://$a/debug/stats" | sed -n 's/.*"push": {.*"sent": \([0-9]*\).*/\1/p')
        [ "${n:-0}" -ge 1 ] || exit 1
    done
}

# settle CONFIG RUNDIR: the agent serves (forked workers too), and a push
# has made its first send (its symbol tables loaded) before the window.
settle() {
    [ "$1" = none ] && return 0
    until_ok 20 test -s "$2/port" || { echo "the agent did not serve (no port file)" >"$work/why"; return 1; }
    sleep 1
    case $1 in push*)
        until_ok 40 pushed "$2" || { echo "no push reached the Collector" >"$work/why"; return 1; } ;;
    esac
}

# announced RUNDIR N: N processes or more announced there.
announced() { [ "$(addrs "$1" | wc -l)" -ge "$2" ]; }

# profiles SERVICE CONFIG RUNDIR SECS N0: a CPU profile, wall profile or
# trace (CONFIG cpu, wall, trace) of SECS + 2 s asked of every announced
# process, once the load's N0 + BACKENDS_S processes are there.
profiles() {
    case $2 in cpu) path=profile ;; wall) path=wall ;; trace) path=trace ;; *) return 0 ;; esac
    eval "want=\$(($5 + \$BACKENDS_$1))"
    until_ok 2 announced "$3" "$want" || true
    : >"$work/curls"
    dbg profiles
    addrs "$3" | while read -r p a; do
        (curl -s -D "$work/head.$p" -o /dev/null -w '%{http_code}' --max-time $(($4 + 60)) \
            "http://$a/debug/pprof/$path?seconds=$(($4 + 2))" >"$work/code.$p"
         date +%s%N >"$work/end.$p") &
        echo "$p" >>"$work/curls"
    done
}

# profiles_ok LOAD_END: every profile asked of a process still alive ran
# past the load's end and answered 200.
profiles_ok() {
    [ -s "$work/curls" ] || return 0
    while read -r p; do
        kill -0 "$p" 2>/dev/null || continue # a backend that ended with its client
        until_ok 120 test -s "$work/end.$p" || true
        [ "$(cat "$work/code.$p")" = 200 ] && [ "$(cat "$work/end.$p")" -gt "$1" ] ||
            { echo "the profile of pid $p answered $(cat "$work/code.$p"), ended $(cat "$work/end.$p") before the load's end $1" >"$work/why"; return 1; }
        d=$(sed -n 's/^X-Pprof-Trace-Dropped: \([0-9]*\).*/\1/p' "$work/head.$p")
        [ -z "$d" ] || echo "services: note: the trace of pid $p dropped $d events (PPROF_TRACE_MB)"
    done <"$work/curls"
    rm -f "$work/curls"
}

dbg() { [ -z "${SERVICES_DEBUG:-}" ] || echo "$(date +%T.%N) $*" >&2; }

# measure SERVICE CONFIG ROUND: one run; appends "SERVICE CONFIG ROUND
# CPU_NS REQUESTS AGENT_NS" to $work/data.
measure() {
    rd="$work/rd"
    rm -rf "$rd"; mkdir -p "$rd/run"; chmod 755 "$rd"; chmod 700 "$rd/run"
    [ "$1" != postgres ] || chown -R postgres "$rd"
    new_group || return 1
    if dbg start && start_"$1" "$(cfg_env "$2" "$rd")" && dbg settle && settle "$2" "$rd" && dbg warm && load_"$1" 1 >/dev/null && dbg sample; then
        sample "$@"
        st=$?
    else
        st=1
    fi
    dbg stop
    stop_"$1"
    SVC=""
    dbg drop
    drop_group
    dbg done
    return $st
}

# sample SERVICE CONFIG ROUND: the window itself.
sample() {
    w=$(window "$2")
    n0=$(addrs "$rd" | wc -l)
    eval "forks=\$BACKENDS_$1"
    if [ "$forks" -gt 0 ]; then sample_inside "$@"; return; fi
    a=$(cpu_ns); threads "$work/th0"
    load_"$1" "$w" >"$work/count" &
    lp=$!
    profiles "$1" "$2" "$rd" "$w" "$n0"
    wait "$lp" || return 1
    b=$(cpu_ns); t=$(date +%s%N); threads "$work/th1"
    need "$1 $2 CPU" "$a" "$b"
    profiles_ok "$t" || return 1
    record "$@"
}

# sample_inside SERVICE CONFIG ROUND: the same for a service whose load
# forks its backends: the load starts first, the profiles once the
# backends serve (they announce themselves after PPROF_START_DELAY_MS),
# and the window of CPU and requests lies inside the load.
sample_inside() {
    load_"$1" $((w + 6)) >/dev/null &
    lp=$!
    sleep 1
    profiles "$1" "$2" "$rd" "$w" "$n0"
    a=$(cpu_ns); threads "$work/th0"; t0=$(date +%s%N)
    dbg window
    sleep "$w"
    b=$(cpu_ns); t=$(date +%s%N); threads "$work/th1"
    need "$1 $2 CPU" "$a" "$b"
    kill -0 "$lp" 2>/dev/null || { echo "the load ended before the window did" >"$work/why"; return 1; }
    wait "$lp" || return 1
    profiles_ok "$t" || return 1
    count_"$1" "$t0" "$t" >"$work/count"
    record "$@"
}

# record SERVICE CONFIG ROUND: the window's line, from a, b, $work/count
# and the threads' files; a window without a completed request fails.
record() {
    [ "$(cat "$work/count")" -gt 0 ] || { echo "no request completed in the window" >"$work/why"; return 1; }
    echo "$1 $2 $3 $((b - a)) $(cat "$work/count") $(agent_ns $((b - a)) "$work/th0" "$work/th1")" >>"$work/data"
    # Each window as it is measured: the table's data, kept in the output.
    tail -n 1 "$work/data" | awk '{ printf "services: %s %s round %s: %.3f s of CPU, %d requests, agent threads %.3f s\n", $1, $2, $3, $4 / 1e9, $5, $6 / 1e9 }'
}

# report: the table, from $work/data; rows that failed are left out (they
# are named at the end).
report() {
    echo
    echo "| service | configuration | CPU s per 1M requests | ratio to no agent, median (min..max) | goal | verdict | agent threads |"
    echo "|---|---|---|---|---|---|---|"
    awk -v order="$configs" -v svcs="$services" -f "$top/test/bench/services_report.awk" "$work/failed" "$work/data"
}

[ -n "${BENCH_STAMPED:-}" ] || stamp # test/bench/run has printed it
echo "services: $rounds rounds of $secs s of load per configuration: $services; $configs"
setup_cgroup
echo "services: CPU read from $METHOD"
for svc_ in $services; do setup_"$svc_" || fail_row "$svc_" all "$(cat "$work/why")"; done
case " $configs " in *" push"*)
    setup_collector || fail_row all push "the test Collector could not be built or did not start (test/collector/build)" ;;
esac

# Round-robin: every configuration of every service once a round. (The
# functions share the shell's variables: these names are the loop's own.)
for round_ in $(seq "$rounds"); do
    for svc_ in $services; do
        for cfg_ in $configs; do
            failed "$svc_" "$cfg_" && continue
            if [ "$cfg_" != none ] && failed "$svc_" none; then
                fail_row "$svc_" "$cfg_" "no baseline (the no-agent row failed)"; continue
            fi
            measure "$svc_" "$cfg_" "$round_" || fail_row "$svc_" "$cfg_" "$(cat "$work/why")"
        done
    done
    echo "services: round $round_ done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
report
echo
echo "services: CPU from $METHOD; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -s "$work/failed" ]; then
    sed 's/^/services: FAILED /' "$work/failed"
    exit 1
fi
