# The C library loads and unloads objects of its own, past any dlclose the
# agent sees: iconv's gconv modules (and NSS's). During a 1000 Hz profile,
# the main thread converts text through 8 such modules in turn, so they
# come and go, while another thread runs code outside every object, so
# each of its samples looks its address up in every loaded object, past
# the ones just unloaded. The host must finish (old builds read the
# unmapped program headers of a gone module in the handler and crashed
# within a second), and the profile must hold at least 3/4 of the CPU
# time the host used meanwhile, both threads' (its truth on a busy machine).
. "$TOP/test/integration/lib.sh"

export PPROF_CPU_HZ=1000
start_agent iconv "$BUILD/test/programs/hostile" iconv 8
cpu0=$(cpu_ms "$PID")
fetch 'debug/pprof/profile?seconds=4' > "$WORK/cpu.pb.gz" &
curl_pid=$!
wait "$curl_pid" || fail "the profile request failed"
# What the host used while the profile ran, as the kernel counts it (the
# host runs 8 s, so it is still there when the 4 s profile ends).
cpu1=$(cpu_ms "$PID") || fail "the host ended before the profile did"
wait_exit "$PID" 30
[ "$STATUS" = 0 ] || { cat "$WORK/iconv.err" >&2; fail "host exited with $STATUS"; }
conversions=$(sed -n 's/^conversions=//p' "$WORK/iconv.out")
[ "${conversions:-0}" -gt 1000 ] || fail "host converted ${conversions:-nothing}"
top=$(pprof -top -unit=ms "$WORK/cpu.pb.gz")
total=$(printf '%s\n' "$top" | sed -n 's/.* of \([0-9.]*\)ms total.*/\1/p')
used=$((cpu1 - cpu0))
note "$conversions conversions; profile total ${total:-0} ms; the host used $used ms of CPU meanwhile"
[ "$used" -ge 200 ] || fail "the host used only $used ms of CPU during the profile: nothing to compare"
awk -v t="${total:-0}" -v u="$used" 'BEGIN { exit !(t >= 0.75 * u) }' \
    || { printf '%s\n' "$top" >&2; fail "only ${total:-0} ms of the host's $used ms of CPU in the profile"; }
expect_contains "$top" "run_iconv" "CPU profile"
echo ok
