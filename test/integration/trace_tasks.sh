# Execution trace annotations (pprofagent.h, as Go's runtime/trace):
# test/programs/trace_tasks serves "request" tasks with nested "parse" and
# "lookup" regions and a log message, and hands a "handoff" task from the
# main thread to a worker. A trace holds them with the caller's stacks, and
# go tool trace's task and region views list them; pprof_trace_enabled()
# is 1 only while a trace records. Threads the program starts and ends
# during the trace are created (with the creator's stack: start_short_lived)
# under the name they gave themselves, and end; the main thread's join of
# each is unblocked from the joined thread.
. "$TOP/test/integration/lib.sh"

# The trace is in Go 1.26's format.
need_go 26

start_agent tasks "$BUILD/test/programs/trace_tasks"
for i in $(seq 100); do grep -q '^enabled 0' "$WORK/tasks.out" && break; sleep 0.05; done
code=$(curl -sS --max-time 60 -o "$WORK/trace" -w '%{http_code}' "http://$ADDR/debug/pprof/trace?seconds=1")
[ "$code" = 200 ] || fail "trace answered $code"
grep -q '^enabled 1' "$WORK/tasks.out" || fail "pprof_trace_enabled() never said 1 during the trace"

"$GO" tool trace -d=parsed "$WORK/trace" >"$WORK/parsed" 2>"$WORK/parsed.err" ||
    { cat "$WORK/parsed.err"; fail "go tool trace cannot read the trace"; }
[ ! -s "$WORK/parsed.err" ] || { cat "$WORK/parsed.err"; fail "go tool trace warns"; }
p=$(cat "$WORK/parsed")
expect_contains "$p" 'TaskBegin'
expect_contains "$p" 'Type="request"'
expect_contains "$p" 'Type="handoff"'
expect_contains "$p" 'RegionBegin'
expect_contains "$p" 'Type="lookup"'
expect_contains "$p" 'Category="user" Message="alice"'
# The caller's stack: the function that called the API.
grep -A2 'Type="lookup"' "$WORK/parsed" | grep -q '^	lookup @' || fail "the lookup region's stack does not start in lookup"
grep -A2 'Type="request"' "$WORK/parsed" | grep -q '^	serve_request @' || fail "the request task's stack does not start in serve_request"
# Threads created in the window: GoCreate named by the thread, from the
# creator's stack; and their end.
grep -A6 'NotExist->Runnable' "$WORK/parsed" >"$WORK/created"
grep -q '^	shortlived @ 0x' "$WORK/created" || fail "no thread created as shortlived"
grep -q '^	start_short_lived @' "$WORK/created" || fail "the creation's stack is not the creator's"
grep -q 'Running->NotExist' "$WORK/parsed" || fail "no thread ends in the trace"
# The main thread's joins are ended by the joined threads: unblocked from
# their M, not its own.
grep -E "^M=[0-9]+ .* GoID=$PID Waiting->Runnable" "$WORK/parsed" | grep -vq "^M=$PID " ||
    fail "no join of the main thread is unblocked from the joined thread"

trace_ui "$WORK/trace"
expect_not_contains "$(cat "$WORK/ui.log")" "Encountered error"
expect_contains "$(curl -s "$url/usertasks")" "request"
expect_contains "$(curl -s "$url/usertasks")" "handoff"
expect_contains "$(curl -s "$url/userregions")" "lookup"
expect_contains "$(curl -s "$url/userregions")" "parse"
for page in "/usertask?type=request" "/userregion?type=parse" "/usertask?type=handoff"; do
    c=$(curl -s -o "$WORK/page" -w '%{http_code}' --max-time 60 "$url$page")
    [ "$c" = 200 ] || fail "go tool trace's $page answered $c"
done
kill "$ui"
echo ok
