# A deadlock gperftools users know, in a new shape: one thread burns CPU
# inside a dl_iterate_phdr callback (it holds the loader lock), another
# makes the agent capture a stack from code no unwinder cache has seen.
# That capture holds libunwind's cache lock while it waits for the loader
# lock; neither the profiling signal on the first thread nor a sampled
# allocation inside the callback may then wait for libunwind's lock. The
# host finishes, and the profile still gives the callback's CPU time to
# its function (the PC is kept, not the callers).
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/hostile"
# Every allocation sampled: the callback's own allocations are captures
# made while holding the loader lock (they get no stack, never a wait).
export PPROF_HEAP_RATE=1
# The callback starts 2 s in, inside the 6 s profile; the server starts in
# the constructor (not after PPROF_START_DELAY_MS), and the host burns on
# until the profile is in.
PPROF_START_DELAY_MS=0 start_agent loader "$H" loader 2
fetch 'debug/pprof/profile?seconds=6' > "$WORK/cpu.pb.gz" &
curl_pid=$!
wait "$curl_pid" || fail "the profile request failed"
grep -q '^loader ok' "$WORK/loader.out" || { stacks "$PID"; fail "no 'loader ok' by the end of the profile: $(cat "$WORK/loader.out")"; }
kill -USR1 "$PID"
wait_exit "$PID" 30
[ "$STATUS" = 0 ] || fail "host exited with $STATUS"
pprof -traces "$WORK/cpu.pb.gz" > "$WORK/traces.txt"
# The holder's samples inside the callback keep their PC only: traces of
# the single frame `spin` (loader_burn's leaf); main's spin has callers.
ms=$(awk '
    function flush() { if (n == 1 && leaf == "spin") total += v; n = 0 }
    /^-+\+-+$/ { flush(); next }
    $1 ~ /^[0-9.]+(ms|s)$/ && NF == 2 {
        v = $1; sub(/ms$/, "", v)
        if ($1 !~ /ms$/) { sub(/s$/, "", v); v *= 1000 }
        leaf = $2; n = 1; next }
    n >= 1 && NF == 1 { n++ }
    END { flush(); printf "%d", total }
' "$WORK/traces.txt")
# Truth is the callback's own thread CPU time (1.5 s of wall time; less CPU
# on a busy machine): the profile must hold at least 2/3 of it.
cpu=$(sed -n 's/^callback_cpu_ms=//p' "$WORK/loader.out")
note "leaf-only samples in the callback: $ms ms; it measured ${cpu:-?} ms of its own CPU"
[ "${cpu:-0}" -ge 100 ] || fail "the callback ran only ${cpu:-0} ms of CPU: nothing to compare"
[ $((ms * 3)) -ge $((cpu * 2)) ] || { cat "$WORK/traces.txt"; fail "only $ms ms of the callback's $cpu ms of CPU in the profile"; }
echo ok
