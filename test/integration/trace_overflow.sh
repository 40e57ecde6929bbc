# A trace that outgrows its memory (PPROF_TRACE_MB=1, a program that makes
# 200,000 reads while the trace records) drops events without ever making
# the program wait, says so in the X-Pprof-Trace-Dropped header and in the
# trace itself (a log message), and still opens in go tool trace with no
# warning.
. "$TOP/test/integration/lib.sh"

# The trace is in Go 1.26's format.
need_go 26

PPROF_TRACE_MB=1 start_agent flood "$BUILD/test/programs/trace_bench" flood 200000
code=$(curl -sS --max-time 120 -D "$WORK/head" -o "$WORK/trace" -w '%{http_code}' \
    "http://$ADDR/debug/pprof/trace?seconds=3")
[ "$code" = 200 ] || fail "trace answered $code"
grep -q '^flooded' "$WORK/flood.out" || note "the reads outlasted the trace (still enough to overflow 1 MiB)"
dropped=$(sed -n 's/^X-Pprof-Trace-Dropped: \([0-9]*\).*/\1/p' "$WORK/head" | tr -d '\r')
[ -n "$dropped" ] && [ "$dropped" -gt 0 ] || { cat "$WORK/head"; fail "no X-Pprof-Trace-Dropped header"; }
note "dropped $dropped events"
"$GO" tool trace -d=parsed "$WORK/trace" >"$WORK/parsed" 2>"$WORK/parsed.err" ||
    { cat "$WORK/parsed.err"; fail "go tool trace cannot read the trace"; }
[ ! -s "$WORK/parsed.err" ] || { cat "$WORK/parsed.err"; fail "go tool trace warns"; }
expect_contains "$(cat "$WORK/parsed")" "events dropped: the trace outgrew its memory"
echo ok
