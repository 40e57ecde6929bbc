#!/bin/sh
# The push's cost (PPROF_PUSH=otlp, docs/fleet.md) on redis under
# redis-benchmark:
#
# 1. throughput: redis-benchmark's requests per second against redis alone,
#    under the agent (idle), and under the agent pushing (its CPU profile
#    always on, at PPROF_CPU_HZ), ROUNDS interleaved rounds, medians and the
#    spread ((max - min) / median) of each configuration measured in the
#    same run; the target for the always-on profile is 1.01;
# 2. the push threads' own CPU (pprofagent-push and pprofagent-send, from
#    /proc) over SECONDS of load at the default interval (15 s), as a share
#    of a core (goal: at most 0.3%), the requests' size and the process's
#    RSS against the agent without push.
#
#   sh test/bench/push.sh BUILD_DIR [ROUNDS] [SECONDS]
set -eu
build=$(cd "$1" && pwd)
rounds=${2:-3}
seconds=${3:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/test/bench/agent_port.sh"
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
    { echo "push: redis-server and redis-benchmark are needed (scripts/install-deps)"; exit 1; }
sh "$top/test/collector/build" "$build" >/dev/null ||
    { echo "push: the test Collector cannot be built"; exit 1; }
work=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill -9 $p 2>/dev/null; done; rm -rf "$work"' EXIT

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
cport=$(port)
printf 'receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%s\nexporters:\n  record:\n    path: %s/got.jsonl\nservice:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    profiles:\n      receivers: [otlp]\n      exporters: [record]\n' \
    "$cport" "$work" >"$work/col.yaml"
"$build/test/collector/otelcol" --config="file:$work/col.yaml" \
    --feature-gates=+service.profilesSupport >"$work/col.log" 2>&1 &
pids="$pids $!"

# start CONFIG: redis on a free port under CONFIG (alone, agent, push);
# sets RPID, RPORT and ADDR.
start() {
    RPORT=$(port)
    rm -f "$work/port"
    case $1 in
    alone) redis-server --port "$RPORT" --save '' --appendonly no >/dev/null 2>&1 & ;;
    agent) env LD_PRELOAD="$build/libpprofagent.so" PPROF_ADDR=127.0.0.1:0 \
        PPROF_PORT_FILE="$work/port" redis-server --port "$RPORT" --save '' \
        --appendonly no >/dev/null 2>&1 & ;;
    push) env LD_PRELOAD="$build/libpprofagent.so" PPROF_ADDR=127.0.0.1:0 \
        PPROF_PORT_FILE="$work/port" PPROF_PUSH=otlp \
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$cport" \
        redis-server --port "$RPORT" --save '' --appendonly no >/dev/null 2>&1 & ;;
    esac
    RPID=$!
    pids="$pids $RPID"
    [ "$1" = alone ] || { wait_port "$work/port" 200 "redis under the agent"; ADDR=$(cat "$work/port"); }
    for i in $(seq 100); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
    # The deferred start (1 s) and the push's first window.
    sleep 2
}

rps() { # the GET and SET rates' mean, requests per second
    redis-benchmark -p "$RPORT" -q -n 200000 -c 20 -t get,set 2>/dev/null |
        tr '\r' '\n' | awk '/requests per second/ {s += $2; n++} END {printf "%.0f\n", s / n}'
}

[ "$rounds" -gt 0 ] && echo "throughput: $rounds rounds of 200,000 GET and SET, 20 clients (load $(cut -d' ' -f1 /proc/loadavg))"
[ "$rounds" -gt 0 ] && for r in $(seq "$rounds"); do
    for c in alone agent push; do
        start $c
        echo "$c $(rps)" >>"$work/rps"
        kill "$RPID"; wait "$RPID" 2>/dev/null || true
    done
done
[ "$rounds" -gt 0 ] && awk '{v[$1] = v[$1] " " $2} END {
    split("alone agent push", order, " ")
    for (i = 1; i <= 3; i++) {
        n = split(v[order[i]], x, " ")
        for (a = 2; a <= n; a++)            # insertion sort (mawk has no asort)
            for (b = a; b > 1 && x[b - 1] + 0 > x[b] + 0; b--) { t = x[b]; x[b] = x[b - 1]; x[b - 1] = t }
        med[i] = x[int((n + 1) / 2)]; spread[i] = (x[n] - x[1]) / med[i] * 100
    }
    printf "| %-34s | %10s | %6s | %8s |\n", "configuration", "req/s", "ratio", "spread"
    printf "|------------------------------------|------------|--------|----------|\n"
    name[1] = "redis alone"; name[2] = "agent loaded, idle"; name[3] = "agent pushing (CPU profile always on)"
    for (i = 1; i <= 3; i++)
        printf "| %-34s | %10.0f | %6.3f | %7.1f%% |\n", name[i], med[i], med[1] / med[i], spread[i]
}' "$work/rps"

# 2. The push threads over SECONDS of load at the default interval.
start agent
rss_agent=$(awk '/^VmRSS/ {print $2}' "/proc/$RPID/status")
redis-benchmark -p "$RPORT" -q -n 100000 -c 20 -t get,set >/dev/null 2>&1
rss_agent=$(awk '/^VmRSS/ {print $2}' "/proc/$RPID/status")
kill "$RPID"; wait "$RPID" 2>/dev/null || true
start push
threads_cpu() { # clock ticks of the push's two threads
    for t in /proc/$RPID/task/*; do
        case "$(cat "$t/comm" 2>/dev/null)" in pprofagent-push | pprofagent-send)
            awk '{print $14 + $15}' "$t/stat" ;; esac
    done | awk '{s += $1} END {print s + 0}'
}
c0=$(threads_cpu)
t0=$(date +%s%N)
end=$(($(date +%s) + seconds))
while [ "$(date +%s)" -lt "$end" ]; do
    redis-benchmark -p "$RPORT" -q -n 50000 -c 20 -t get,set >/dev/null 2>&1
done
c1=$(threads_cpu)
t1=$(date +%s%N)
rss_push=$(awk '/^VmRSS/ {print $2}' "/proc/$RPID/status")
stats=$(curl -s "http://$ADDR/debug/stats" | sed 's/.*"push": //')
hz=$(getconf CLK_TCK)
awk -v c=$((c1 - c0)) -v hz="$hz" -v t=$((t1 - t0)) -v ra="$rss_agent" -v rp="$rss_push" -v s="$stats" 'BEGIN {
    cpu = c / hz; wall = t / 1e9
    printf "push threads: %.2f s of CPU in %.0f s of load: %.3f%% of a core (goal 0.3%%)\n", cpu, wall, cpu / wall * 100
    printf "redis RSS after the load: %d KiB under the agent, %d KiB pushing (%+d KiB)\n", ra, rp, rp - ra
    printf "push counters: %s\n", s
    exit !(cpu / wall * 100 <= 0.3)
}' || echo "push: the push threads used more than 0.3% of a core"
exit 0
