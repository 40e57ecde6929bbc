# A host that exports its own (here broken) zlib, liblzma, libelf and libdw
# names, as varnishd exports its zlib: the agent's compression and
# symbolization use the agent's copies, never the host's. The CPU profile
# answers 200, decodes, names the host's function with its source line, and
# the host's copies were never called (each says so on stderr). Before,
# every protobuf profile answered 500.
. "$TOP/test/integration/lib.sh"

start_agent own "$BUILD/test/programs/own_libs" 60
code=$(curl -s -o "$WORK/cpu.pb.gz" -w '%{http_code}' --max-time 60 \
    "http://$ADDR/debug/pprof/profile?seconds=1")
[ "$code" = 200 ] || fail "CPU profile answered $code: $(head -c 300 "$WORK/cpu.pb.gz")"
lines=$(pprof -top -cum -lines -nodecount=20 "$WORK/cpu.pb.gz")
echo "$lines" | head -n 12
expect_contains "$lines" "own_libs_burn" "symbolized profile"
expect_contains "$lines" "own_libs.c:" "source lines"
code=$(curl -s -o "$WORK/heap.pb.gz" -w '%{http_code}' --max-time 60 "http://$ADDR/debug/pprof/heap")
[ "$code" = 200 ] || fail "heap profile answered $code"
pprof -raw "$WORK/heap.pb.gz" > /dev/null
stop "$PID"
if grep "host's" "$WORK/own.err"; then fail "the agent called the host's copies"; fi
echo ok
