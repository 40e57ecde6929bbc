# Every endpoint once, on the demo service under the agent: each answers
# 200 with its content type, the pprof-format ones parse with go tool
# pprof and hold samples of the demo's own functions where the demo does
# that work, the text forms carry their headers. The quick look of
# `make check`; the tests that check values are the others.
. "$TOP/test/integration/lib.sh"

export PPROF_START_DELAY_MS=0
# Until the test stops it, at most past the runner's limit (400 s).
start_agent demo "$BUILD/test/programs/demo_service" 600

# The index lists every route it serves.
index=$(fetch debug/pprof/)
for name in allocs heap block mutex goroutine cmdline profile wall trace \
    symbol threadcreate stats memory; do
    expect_contains "$index" "$name" "the index"
done

# Binary profiles: 200 and a profile go tool pprof reads.
for path in heap allocs block mutex goroutine threadcreate \
    "profile?seconds=1" "wall?seconds=1"; do
    code=$(http_status "debug/pprof/$path")
    [ "$code" = 200 ] || fail "/debug/pprof/$path answered $code"
    pprof -raw "http://$ADDR/debug/pprof/$path" >"$WORK/raw" ||
        fail "go tool pprof could not read /debug/pprof/$path"
    grep -q '^Samples:' "$WORK/raw" || fail "/debug/pprof/$path has no samples section"
done
# The demo's workers burn CPU in parse_request: a second's profile has it.
top=$(pprof -top "http://$ADDR/debug/pprof/profile?seconds=1")
expect_contains "$top" "parse_request" "the CPU profile"

# Text forms and the rest.
expect_contains "$(fetch 'debug/pprof/goroutine?debug=2')" "demo_service" "the threads dump"
expect_contains "$(fetch 'debug/pprof/heap?debug=1')" "heap profile:" "the heap's text form"
expect_contains "$(fetch debug/pprof/cmdline | tr '\0' ' ')" "demo_service" "cmdline"
expect_contains "$(fetch debug/pprof/symbol)" "num_symbols" "symbol"
expect_contains "$(fetch debug/stats)" "{" "stats"
expect_contains "$(fetch 'debug/memory?format=json')" "\"rss\"" "memory"
code=$(http_status "debug/pprof/trace?seconds=1")
[ "$code" = 200 ] || fail "/debug/pprof/trace answered $code"
code=$(http_status "debug/pprof/no-such-profile")
[ "$code" = 404 ] || fail "an unknown profile answered $code, not 404"
stop "$PID"
echo ok
