# The execution trace of a real service: Debian's redis-server under
# redis-benchmark. The trace opens in go tool trace with no warning, its
# goroutines carry redis's thread names, and its network blocking profile
# names redis's own functions (the event loop's wait under aeMain, socket
# reads and writes under readQueryFromClient and writeToClient); the
# answers redis gives are those of a run without a trace.
. "$TOP/test/integration/lib.sh"

# The trace is in Go 1.26's format.
need_go 26
for p in redis-server redis-benchmark redis-cli; do
    command -v "$p" >/dev/null 2>&1 || fail "$p is not installed (scripts/install-deps)"
done

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_agent redis redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK"
for i in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
timeout 60 redis-benchmark -p "$port" -q -n 3000000 -t set,get -c 20 >"$WORK/bench.out" 2>&1 &
B=$!
# The trace starts once the benchmark is connected and running.
for i in $(seq 200); do
    [ "$(redis-cli -p "$port" info clients | sed -n 's/^connected_clients:\([0-9]*\).*/\1/p')" -gt 5 ] 2>/dev/null && break
    sleep 0.05
done
code=$(curl -sS --max-time 120 -o "$WORK/trace" -w '%{http_code}' "http://$ADDR/debug/pprof/trace?seconds=0.5")
[ "$code" = 200 ] || fail "trace answered $code"
echo "SET k v" | redis-cli -p "$port" >/dev/null
answer=$(echo "GET k" | redis-cli -p "$port")
[ "$answer" = v ] || fail "redis answered '$answer' after the trace"
kill "$B" 2>/dev/null || true; wait "$B" 2>/dev/null || true

"$GO" tool trace -d=parsed "$WORK/trace" >"$WORK/parsed" 2>"$WORK/parsed.err" ||
    { cat "$WORK/parsed.err"; fail "go tool trace cannot read the trace"; }
[ ! -s "$WORK/parsed.err" ] || { cat "$WORK/parsed.err"; fail "go tool trace warns"; }
grep -q "^	redis-server @ 0x" "$WORK/parsed" || fail "no goroutine named redis-server"
"$GO" tool trace -pprof=net "$WORK/trace" >"$WORK/net.pb" 2>"$WORK/net.err" ||
    { cat "$WORK/net.err"; fail "go tool trace -pprof=net"; }
top=$("$GO" tool pprof -top -cum -nodecount=40 "$WORK/net.pb" 2>/dev/null)
echo "$top" | head -n 20
expect_contains "$top" "aeMain"
expect_contains "$top" "readQueryFromClient"
echo ok
