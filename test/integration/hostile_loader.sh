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
start_agent loader "$H" loader 1
fetch 'debug/pprof/profile?seconds=3' > "$WORK/cpu.pb.gz" &
curl_pid=$!
wait_exit "$PID" 30
[ "$STATUS" = 0 ] || fail "host exited with $STATUS"
grep -q '^loader ok' "$WORK/loader.out" || fail "no 'loader ok': $(cat "$WORK/loader.out")"
wait "$curl_pid" || fail "the profile request failed"
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
cpu=$(sed -n 's/^loader ok callback_cpu_ms=\([0-9]*\).*/\1/p' "$WORK/loader.out")
note "samples in the callback, with their callers: $ms ms (its thread used $cpu ms of CPU)"
[ "$ms" -ge $((cpu / 2)) ] && [ "$ms" -ge 100 ] ||
    { cat "$WORK/traces.txt"; fail "only $ms ms of the callback's $cpu ms of CPU in the profile"; }
echo ok
