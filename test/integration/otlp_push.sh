#!/bin/sh
# Push to a real OpenTelemetry Collector (test/collector: the core OTLP
# receiver, profiles on, and an exporter that records what arrived), through
# a fault-injecting proxy (test/collector/fault_proxy.py):
#
# 1. the services start first, the Collector later: the push retries,
#    drops the oldest intervals past its queue and counts them;
# 2. what arrives for a process matches its own pull endpoints: the CPU
#    samples of a /debug/pprof/profile window (served meanwhile as the
#    push's guest) are all in the pushed windows around it; the pushed
#    CPU splits between hot_a and hot_b as the program measured itself
#    (3:1); the heap in use and the functions of the heap and mutex
#    profiles agree; resource attributes and build ids are there;
# 3. the Collector is killed and restarted: the push resumes;
# 4. the Collector answers 429 (Retry-After) and 503 for a while: the push
#    retries and resumes;
# 5. at exit the last interval is sent.
. "$TOP/test/integration/lib.sh"

collector_prepare
CPORT=$(free_port)
PPORT=$(free_port)
GOT="$WORK/received.jsonl"
collector_config "$CPORT" "$GOT"

echo pass >"$WORK/proxy.mode"
: >"$WORK/proxy.log"
python3 "$TOP/test/collector/fault_proxy.py" "$PPORT" "$CPORT" \
    "$WORK/proxy.mode" "$WORK/proxy.log" &
PIDS="$PIDS $!"

# stat FIELD: the push's counter FIELD in /debug/stats of $ADDR.
stat() {
    fetch debug/stats | sed -n "s/.*\"push\": {.*\"$1\": \([0-9]*\).*/\1/p"
}
# retries: both programs' retries (the proxy throttles whichever asks).
retries() {
    echo $(( $(ADDR=$BADDR stat retries) + $(ADDR=$DADDR stat retries) ))
}
# wait_stat FIELD MIN SECS: until the counter reaches MIN.
wait_stat() {
    at_least "$2" "$3" stat "$1" && return 0
    fetch debug/stats >&2
    fail "push $1 did not reach $2 within $3 s"
}
export PPROF_PUSH=otlp PPROF_PUSH_INTERVAL=2 \
    OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$PPORT" \
    OTEL_SERVICE_NAME=otlp-test \
    OTEL_RESOURCE_ATTRIBUTES="deployment.environment=ci,team=prof%20ilers"
# The CPU truth host: the push starts with the process.
PPROF_START_DELAY_MS=0 start_agent burn "$BUILD/test/programs/cpu_burn" 1 300
BPID=$PID
BADDR=$ADDR
# The heap and mutex host: a sample every 4 KiB (about 2,000 live ones), so
# that the heap in use moves little between a pushed window and a pull.
PPROF_HEAP_RATE=4096 start_agent demo "$BUILD/test/programs/demo_service"
DPID=$PID
DADDR=$ADDR

# 1. No Collector yet: every try fails; past the queue, intervals drop.
ADDR=$BADDR
wait_stat attempts 2 30
wait_stat dropped 1 60
[ "$(stat sent)" = 0 ] || fail "requests counted sent with no Collector"
note "no Collector: $(stat attempts) tries, $(stat dropped) intervals dropped"
fetch debug/pprof/ | grep -q "Push (OTLP) to http://127.0.0.1:$PPORT" ||
    fail "the index page does not show the push"
start_collector
wait_requests "$BPID" 2 60
wait_requests "$DPID" 2 60
note "the Collector, started later, got $(requests "$BPID") + $(requests "$DPID") requests"

# 2a. CPU: a pull while the push runs is its guest: all its samples are in
# the pushed windows around it.
from=$(date +%s%N)
fetch "debug/pprof/profile?seconds=3" -o "$WORK/cpu.pb.gz" -w '%{http_code}' >"$WORK/cpu.code"
to=$(date +%s%N)
[ "$(cat "$WORK/cpu.code")" = 200 ] || fail "/debug/pprof/profile during the push: $(cat "$WORK/cpu.code")"
top=$(pprof -top -cum -unit=ms "$WORK/cpu.pb.gz")
pull=$(awk -v a="$(top_cum "$top" hot_a)" -v b="$(top_cum "$top" hot_b)" 'BEGIN {print (a + b) * 1000000}')
n=$(requests "$BPID")
wait_requests "$BPID" $((n + 2)) 30
$READ "$GOT" "$BPID" >"$WORK/burn.txt"
push=$(awk -v f="$from" -v t="$to" '
    $1 == "function" && $3 == "cpu" && ($4 == "hot_a" || $4 == "hot_b") &&
    $6 < t && $6 + $7 > f {s += $5} END {print s + 0}' "$WORK/burn.txt")
note "CPU of hot_a+hot_b: pull $pull ns, pushed windows around it $push ns"
awk -v p="$pull" -v q="$push" 'BEGIN {exit !(p > 0 && p <= q + 10000000)}' ||
    fail "the pull's CPU samples are not all in the pushed windows"
awk '$1 == "function" && $3 == "cpu" && $4 == "hot_a"' "$WORK/burn.txt" | grep -q . ||
    fail "no hot_a in the pushed CPU"

# 2b. Truth: the program's own split of its CPU between hot_a and hot_b,
# within three standard deviations of the samples' count (at least 200 of
# them pushed: on a busy machine the burner may get little CPU).
end=$(($(date +%s) + 120))
while :; do
    $READ "$GOT" "$BPID" >"$WORK/burn.txt"
    set -- $(awk '$1 == "function" && $3 == "samples" && $4 == "hot_a" {a += $5}
        $1 == "function" && $3 == "samples" && $4 == "hot_b" {b += $5} END {print a + 0, b + 0}' "$WORK/burn.txt")
    [ $(($1 + $2)) -ge 200 ] && [ "$2" -gt 0 ] && break
    [ "$(date +%s)" -le "$end" ] || fail "fewer than 200 CPU samples pushed in 2 minutes ($1 + $2)"
    sleep 2
done
na=$1 nb=$2
PID=$BPID
set -- $(host_figures burn a)
note "hot_a / hot_b: the program measured $1 / $2 ns, pushed $na / $nb samples"
awk -v a="$1" -v b="$2" -v na="$na" -v nb="$nb" 'BEGIN {
    d = (na / nb) / (a / b) - 1; if (d < 0) d = -d
    exit !(d < 3 * sqrt(1 / na + 1 / nb) + 0.03)}' ||
    fail "the pushed CPU is not split as the program measured"

# 2c. Heap in use: the pull's, taken between two pushed windows, lies
# between theirs, within 10% (the same samples, a little churn).
ADDR=$DADDR
n=$(requests "$DPID")
wait_requests "$DPID" $((n + 1)) 30
# last PID N: the last N requests of PID, as recorded.
last() {
    awk -v p="\"intValue\":\"$1\"" 'index(substr($0, 1, 2000), p)' "$GOT" | tail -n "$2"
}
inuse() { # the last pushed heap in use of the demo
    last "$DPID" 1 | $READ /dev/stdin "$DPID" | awk '$1 == "profile" && $3 == "inuse_space/bytes" {v = $5} END {sub("total=", "", v); print v}'
}
before=$(inuse)
fetch debug/pprof/heap -o "$WORK/heap.pb.gz"
pull=$(pprof -top -unit=B -sample_index=inuse_space "$WORK/heap.pb.gz" |
    sed -n 's/.* of \([0-9]*\)B total.*/\1/p' | head -n 1)
wait_requests "$DPID" $((n + 2)) 30
after=$(inuse)
note "heap in use: pushed $before, pulled $pull, pushed $after bytes"
awk -v a="$before" -v p="$pull" -v b="$after" 'BEGIN {
    lo = a < b ? a : b; hi = a < b ? b : a; exit !(p >= lo * 0.9 && p <= hi * 1.1 && p > 0)}' ||
    fail "the pulled heap in use is not between the pushed ones"
last "$DPID" 3 | $READ /dev/stdin "$DPID" >"$WORK/demo.txt"
for f in render_response worker; do
    awk -v f=$f '$1 == "function" && $3 == "inuse_space" && $4 == f' "$WORK/demo.txt" | grep -q . ||
        fail "$f missing from the pushed heap"
done
# Mutex: the pushed delays name the functions the pull does.
fetch debug/pprof/mutex -o "$WORK/mutex.pb.gz"
pprof -top "$WORK/mutex.pb.gz" | grep -q worker || fail "the pulled mutex profile lacks worker"
awk '$1 == "function" && $3 == "delay" && $4 == "worker" && $5 > 0' "$WORK/demo.txt" | grep -q . ||
    fail "the pushed mutex or block delays lack worker"

# 2d. Resource and mappings.
res=$(awk '$1 == "request" && $2 == 1' "$WORK/burn.txt")
for want in service.name=otlp-test "process.pid=$BPID" process.executable.name=cpu_burn \
    "process.executable.path=$BUILD/test/programs/cpu_burn" "host.name=$(hostname)" \
    deployment.environment=ci "team=prof ilers" "process.command_line=$BUILD/test/programs/cpu_burn 1 300"; do
    expect_contains "$res" "resource $want" "the pushed resource"
done
expect_contains "$res" "resource service.instance.id=" "the pushed resource"
ids=$(awk '$4 ~ /^service.instance.id=/ {print $4}' "$WORK/burn.txt" | sort -u | wc -l)
[ "$ids" = 1 ] || fail "service.instance.id changed between requests"
bid=$(readelf -n "$BUILD/test/programs/cpu_burn" | awk '/Build ID/ {print $3}')
grep -q "^mapping 1 $BUILD/test/programs/cpu_burn build_id=$bid" "$WORK/burn.txt" ||
    fail "the executable's mapping lacks its build id $bid"

# 3. The Collector killed, then restarted.
ADDR=$BADDR
kill -9 "$CPID"
wait "$CPID" 2>/dev/null || true
a=$(stat attempts)
wait_stat attempts $((a + 2)) 30
[ "$(stat last_status)" = 0 ] || fail "a dead Collector gave an answer"
n=$(requests "$BPID")
start_collector
wait_requests "$BPID" $((n + 1)) 60
note "killed and restarted: $(requests "$BPID") requests, $(stat retries) retries"

# 4. 429 with Retry-After, then 503: retried, then accepted.
r=$(retries)
s=$(stat sent)
echo "429 2" >"$WORK/proxy.mode"
until_log() { # STATUS COUNT
    end=$(($(date +%s) + 60))
    while [ "$(grep -c "^$1 " "$WORK/proxy.log")" -lt "$2" ]; do
        [ "$(date +%s)" -le "$end" ] || fail "the proxy did not answer $1 $2 times"
        sleep 0.1
    done
}
until_log 429 2
echo "503 2" >"$WORK/proxy.mode"
until_log 503 2
wait_stat sent $((s + 2)) 60
[ "$(retries)" -ge $((r + 3)) ] || fail "429 and 503 were not retried ($(retries) retries, $r before)"
note "throttled: $(grep -c '^429 ' "$WORK/proxy.log") x 429, $(grep -c '^503 ' "$WORK/proxy.log") x 503; $(retries) retries ($r before), $(stat dropped) dropped"

# 5. Exit: with an interval longer than its life, only the exit can send
# a program's profiles; it does, and its CPU is there.
PPROF_PUSH_INTERVAL=600 PPROF_START_DELAY_MS=0 start_agent short "$BUILD/test/programs/cpu_burn" 1 2
wait_exit "$PID" 30
[ "$(requests "$PID")" = 1 ] || { cat "$WORK/short.err" >&2; tail -n 5 "$WORK/proxy.log" >&2
    fail "the exit sent $(requests "$PID") requests, not 1"; }
$READ "$GOT" "$PID" | awk '$1 == "function" && $3 == "cpu" && $4 == "hot_a" && $5 > 0' | grep -q . ||
    fail "the exit's request lacks the CPU profile"
note "exit: the last interval arrived"

# 6. A forked child (no exec) pushes as its own process, with its own
# instance id; under PPROF_CHILDREN=off it does not. The children live
# until the first one's push arrived (the file named by their argument),
# not for a time a loaded machine may not give them (at a load of 23, 8 s
# were not enough for a first push).
fork_prog='import os, sys, time
time.sleep(2)
pid = os.fork()
if pid == 0:
    print("child", os.getpid(), flush=True)
    end = time.time() + 120
    while not os.path.exists(sys.argv[1]) and time.time() < end:
        time.sleep(0.1)
    os._exit(0)
os.waitpid(pid, 0)'
# Both at once: each its own process, its requests told apart by pid.
for policy in serve off; do
    PPROF_CHILDREN=$policy PPROF_PUSH_INTERVAL=1 start_agent "fork_$policy" python3 -c "$fork_prog" "$WORK/fork_done"
    eval "pid_$policy=\$PID"
done
fork_child() { sed -n 's/^child //p' "$WORK/fork_$1.out"; }
wait_until "the python children" eval '[ -n "$(fork_child serve)" ] && [ -n "$(fork_child off)" ]'
wait_requests "$(fork_child serve)" 1 90
touch "$WORK/fork_done"
for policy in serve off; do
    eval "PID=\$pid_$policy"
    wait_exit "$PID" 30
    child=$(fork_child $policy)
    [ -n "$child" ] || fail "the python child did not start"
    n=$(requests "$child")
    note "PPROF_CHILDREN=$policy: the forked child $child sent $n requests"
    if [ $policy = serve ]; then
        [ "$n" -ge 1 ] || fail "the forked child pushed nothing"
        p=$(last "$PID" 1 | $READ /dev/stdin "$PID" | awk '$4 ~ /^service.instance.id=/ {print $4}')
        c=$(last "$child" 1 | $READ /dev/stdin "$child" | awk '$4 ~ /^service.instance.id=/ {print $4}')
        [ -n "$c" ] && [ "$p" != "$c" ] || fail "the child pushed under its parent's instance id"
    else
        [ "$n" = 0 ] || fail "the forked child pushed under PPROF_CHILDREN=off"
    fi
done

# 7. HTTPS: a Collector with a certificate of a CA made here. Verified with
# OTEL_EXPORTER_OTLP_CERTIFICATE, profiles arrive; against the system's CAs
# the push refuses the server. OpenSSL is loaded only for https.
grep -q libssl "/proc/$BPID/maps" && fail "a plain-HTTP push loaded OpenSSL"
cd "$WORK"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout ca.key -out ca.crt -subj /CN=pprofagent-test-ca -days 1 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout srv.key -out srv.csr -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext
openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out srv.crt -days 1 -extfile san.ext 2>/dev/null
cd - >/dev/null
TPORT=$(free_port)
collector_config "$TPORT" "$WORK/tls.jsonl" tls
start_collector
GOT="$WORK/tls.jsonl"
OTEL_EXPORTER_OTLP_ENDPOINT="https://localhost:$TPORT" OTEL_EXPORTER_OTLP_CERTIFICATE="$WORK/ca.crt" \
    PPROF_PUSH_INTERVAL=1 start_agent tls "$BUILD/test/programs/cpu_burn" 1 300
wait_requests "$PID" 2 60
grep -q libssl "/proc/$PID/maps" || fail "the https push did not use OpenSSL"
note "https with the test CA: $(requests "$PID") requests"
OTEL_EXPORTER_OTLP_ENDPOINT="https://127.0.0.1:$TPORT" \
    PPROF_PUSH_INTERVAL=1 start_agent untrusted "$BUILD/test/programs/cpu_burn" 1 300
wait_stat attempts 2 60
[ "$(stat sent)" = 0 ] && [ "$(requests "$PID")" = 0 ] || fail "a server of an unknown CA was trusted"
grep "TLS with 127.0.0.1 failed" "$WORK/untrusted.err" || fail "no line said why TLS failed"
echo PASS
