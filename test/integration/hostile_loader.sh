# A deadlock gperftools users know, in a new shape: one thread burns CPU
# inside a dl_iterate_phdr callback (it holds the loader lock), another
# makes the agent capture a stack from code it has not seen yet. With
# libunwind that capture held its cache lock while waiting for the loader
# lock, and the first thread could not be unwound at all. The table-driven
# walker needs neither lock: the host finishes, and the callback's CPU
# time is in the profile with its callers (through dl_iterate_phdr).
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/hostile"
# Every allocation sampled: the callback's own allocations are captures
# made while holding the loader lock (never a wait).
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
# The holder's samples inside the callback: traces with the leaf `spin`
# (loader_burn's) that go through the callback; main's spin does not.
ms=$(awk '
    function flush() { if (leaf == "spin" && through) total += v; leaf = ""; through = 0 }
    /^-+\+-+$/ { flush(); next }
    $1 ~ /^[0-9.]+(ms|s)$/ && NF == 2 {
        v = $1; sub(/ms$/, "", v)
        if ($1 !~ /ms$/) { sub(/s$/, "", v); v *= 1000 }
        leaf = $2; next }
    NF == 1 && $1 == "slow_callback" { through = 1 }
    END { flush(); printf "%d", total }
' "$WORK/traces.txt")
# Truth is the callback's own thread CPU time (1.5 s of wall time; less CPU
# on a busy machine): the profile must hold at least 2/3 of it.
cpu=$(sed -n 's/^callback_cpu_ms=//p' "$WORK/loader.out")
note "samples in the callback, with their callers: $ms ms; it measured ${cpu:-?} ms of its own CPU"
[ "${cpu:-0}" -ge 100 ] || fail "the callback ran only ${cpu:-0} ms of CPU: nothing to compare"
[ $((ms * 3)) -ge $((cpu * 2)) ] || { cat "$WORK/traces.txt"; fail "only $ms ms of the callback's $cpu ms of CPU in the profile"; }
echo ok
