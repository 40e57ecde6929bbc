# The agent's footprint in a served process: at most 4 threads of its own
# at idle (civetweb's listener and two workers, and the watch, pprof-watch). Requests that wait (CPU
# profiles, ?seconds=N deltas) run on threads of their own, one each, that
# end with the request: four at once are all served (none refused 503),
# quick requests are answered meanwhile, a second CPU profile still gets
# Go's 500, and the count is back to at most 4 soon after.
. "$TOP/test/integration/lib.sh"

# batch_job has one thread of its own: every other one is the agent's.
start_agent idle "$BUILD/test/programs/batch_job" wait 0 60
agent_threads() {
    n=0
    names=""
    for t in /proc/$PID/task/*; do
        [ "${t##*/}" = "$PID" ] && continue
        c=$(cat "$t/comm" 2>/dev/null) || continue # ended meanwhile
        n=$((n + 1))
        names="$names $c"
    done
    echo "$n$names"
}
count() { agent_threads | cut -d' ' -f1; }
idle=$(agent_threads)
note "agent threads at idle: $idle"
[ "${idle%% *}" -le 4 ] || fail "${idle%% *} agent threads at idle, want at most 4"

# Four long requests at once (three heap deltas and a CPU profile), a
# second CPU profile, and a goroutine dump while they run.
get() { # NAME PATH: fetches in the background, code in $WORK/NAME.code
    curl -s -o "$WORK/$1" -w '%{http_code}' --max-time 60 "http://$ADDR/debug/pprof/$2" > "$WORK/$1.code" &
}
start=$(date +%s%N)
get h1 'heap?seconds=3'; c1=$!
get h2 'heap?seconds=3'; c2=$!
get h3 'heap?seconds=3'; c3=$!
get p1 'profile?seconds=3'; c4=$!
sleep 0.3
get p2 'profile?seconds=3'; c5=$!
sleep 0.3
g=$(curl -s -o "$WORK/g" -w '%{http_code}' --max-time 30 "http://$ADDR/debug/pprof/goroutine?debug=1")
took=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$g" = 200 ] || fail "goroutine during the long requests: $g"
expect_contains "$(cat "$WORK/g")" "goroutine profile: total" "goroutine"
[ "$took" -lt 2800 ] || fail "goroutine answered after $took ms: it waited for a long request"

# The most agent threads seen while the requests run.
busy=0
busy_names=""
while kill -0 $c1 2>/dev/null || kill -0 $c2 2>/dev/null || kill -0 $c3 2>/dev/null ||
    kill -0 $c4 2>/dev/null; do
    now=$(agent_threads)
    if [ "${now%% *}" -gt "$busy" ]; then busy=${now%% *}; busy_names=$now; fi
    sleep 0.1
done
wait $c1 $c2 $c3 $c4 $c5 || true
ended=$(date +%s%N)
note "agent threads during the long requests, at most: $busy_names"

for f in h1 h2 h3 p1; do
    [ "$(cat "$WORK/$f.code")" = 200 ] ||
        fail "long request $f answered $(cat "$WORK/$f.code") ($(head -c 200 "$WORK/$f")), want 200"
    gzip -t < "$WORK/$f" 2>/dev/null || fail "long request $f: the body is not a gzipped profile"
done
[ "$(cat "$WORK/p2.code")" = 500 ] || fail "second concurrent CPU profile answered $(cat "$WORK/p2.code"), want Go's 500"
expect_contains "$(cat "$WORK/p2")" "cpu profiling already in use" "second CPU profile"
go tool pprof -raw "$WORK/h1" > "$WORK/h1.raw" 2>&1 || { cat "$WORK/h1.raw" >&2; fail "the heap delta does not parse"; }
note "goroutine answered in $took ms; heap deltas and CPU profile 200, second CPU profile 500"
# One thread per long request besides the pool: 3 + 4 at least.
[ "$busy" -ge 7 ] || fail "at most $busy agent threads during four long requests: they did not get threads of their own"

# back_to_pool WHAT: the agent's threads come back to the idle pool (4 at
# most) within 2 s after WHAT ended.
back_to_pool() {
    i=0
    while [ "$(count)" -gt 4 ]; do
        i=$((i + 1))
        [ $i -le 20 ] || fail "$(agent_threads) agent threads 2 s after the $1 ended, want at most 4"
        sleep 0.1
    done
}

# Back to the idle pool within 2 s of the last response.
back_to_pool requests
back=$(( ($(date +%s%N) - ended) / 1000000 ))
note "agent threads after: $(agent_threads), $back ms after the last response"

# Hand-off is bounded: at most 8 long requests at once, the rest 503.
delta_codes() { for i in 1 2 3 4 5 6 7 8 9 10; do cat "$WORK/d$i.code"; echo; done; }
deltas=""
for i in 1 2 3 4 5 6 7 8 9 10; do get "d$i" 'goroutine?seconds=2'; deltas="$deltas $!"; done
# shellcheck disable=SC2086
wait $deltas || true
codes=$(delta_codes | sort | uniq -c | tr -s ' \n' '  ')
note "ten goroutine deltas at once: $codes"
ok=$(delta_codes | grep -c '^200$' || true)
busy503=$(delta_codes | grep -c '^503$' || true)
[ "$ok" -ge 8 ] && [ $((ok + busy503)) = 10 ] || fail "ten goroutine deltas at once answered $codes, want 8 or more 200 and the rest 503"
back_to_pool deltas
stop "$PID"
echo ok
