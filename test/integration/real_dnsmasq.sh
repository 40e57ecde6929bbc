# Debian's dnsmasq under the agent: a daemon that closes every inherited
# descriptor at start and then opens its own (UDP and TCP listeners, a
# pipe), which get the numbers the agent used before agent/host/fds.c. In the
# foreground on a loopback port, serving 400 names from a hosts file, it
# must answer every query over UDP and over TCP correctly while 4 clients
# query at once, heap samples are taken at a high rate and a CPU profile is
# fetched; and it must exit on SIGTERM with the status it has without the
# agent.
. "$TOP/test/integration/lib.sh"

DNSMASQ=$(command -v dnsmasq || echo /usr/sbin/dnsmasq)
[ -x "$DNSMASQ" ] || fail "dnsmasq is not installed (scripts/install-deps)"
command -v dig >/dev/null 2>&1 || fail "dig is not installed (scripts/install-deps)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

NAMES=400
i=1
: >"$WORK/hosts"; : >"$WORK/batch"; : >"$WORK/expected"
while [ $i -le $NAMES ]; do
    addr="10.$((i / 200)).$((i % 200)).$((i % 7 + 1))"
    echo "$addr host$i.test" >>"$WORK/hosts"
    echo "host$i.test" >>"$WORK/batch"
    echo "$addr" >>"$WORK/expected"
    i=$((i + 1))
done

# dns NAME PROTO-OPTION: every name once through dig; fails unless every
# answer is the expected one.
dns() {
    # A try that timed out on a busy machine and was answered on the next
    # is said in a ";;" line: only the answers count.
    timeout 60 dig @127.0.0.1 -p "$PORT" +short +tries=3 +time=5 $2 \
        -f "$WORK/batch" >"$WORK/$1.dig" 2>&1 || true
    grep -v '^;;' "$WORK/$1.dig" >"$WORK/$1.answers" || true
    if grep -q '^;;' "$WORK/$1.dig"; then note "$1: $(grep -c '^;;' "$WORK/$1.dig") tries failed"; fi
    cmp -s "$WORK/$1.answers" "$WORK/expected" || {
        diff "$WORK/expected" "$WORK/$1.answers" | head -n 10 >&2
        fail "$1: $(grep -vxFf "$WORK/expected" "$WORK/$1.answers" | wc -l) wrong answers"
    }
}

# run NAME AGENT(0/1): dnsmasq on a fresh port; sets PID and PORT.
run() {
    PORT=$(free_port)
    set -- "$1" "$2" "$DNSMASQ" --keep-in-foreground --conf-file=/dev/null \
        --port="$PORT" --listen-address=127.0.0.1 --bind-interfaces \
        --no-resolv --no-hosts --addn-hosts="$WORK/hosts" --user="$(id -un)" \
        --pid-file= --log-facility=- --cache-size=0
    if [ "$2" = 1 ]; then
        name=$1; shift 2
        start_agent "$name" "$@"
    else
        name=$1; shift 2
        "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
        PID=$!; PIDS="$PIDS $PID"
    fi
    i=0
    until dig @127.0.0.1 -p "$PORT" +short +tries=1 +time=1 host1.test 2>/dev/null | grep -q '^10\.'; do
        i=$((i + 1)); [ $i -lt 100 ] || { cat "$WORK/$name.err" >&2; fail "$name: no answer"; }
        sleep 0.1
    done
}

run plain 0
dns plain-udp ""
dns plain-tcp +tcp
kill -TERM "$PID"; wait_exit "$PID" 10; plain_status=$STATUS

export PPROF_HEAP_RATE=4096
run agent 1
dns agent-udp ""
dns agent-tcp +tcp
# Under load: 4 clients at once, twice each way, and a CPU profile.
CLIENTS=""
for n in 1 2; do
    dns "load-udp-$n" "" & CLIENTS="$CLIENTS $!"
    dns "load-tcp-$n" +tcp & CLIENTS="$CLIENTS $!"
done
fetch 'debug/pprof/profile?seconds=2' >"$WORK/cpu.pb.gz"
for j in $CLIENTS; do wait "$j" || fail "a client under load saw wrong answers"; done
pprof -top "$WORK/cpu.pb.gz" >"$WORK/cpu.top"
head -n 3 "$WORK/cpu.top"
fetch debug/pprof/heap >"$WORK/heap.pb.gz"
pprof -top -sample_index=alloc_space "$WORK/heap.pb.gz" >/dev/null
kill -TERM "$PID"; wait_exit "$PID" 10
[ "$STATUS" = "$plain_status" ] || fail "exit status $STATUS on SIGTERM, $plain_status without the agent"
grep -q 'exiting on receipt of SIGTERM' "$WORK/agent.err" || fail "dnsmasq did not log its SIGTERM exit"
echo ok
