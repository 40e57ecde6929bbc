# The C library loads and unloads objects of its own, past any dlclose the
# agent sees: iconv's gconv modules (and NSS's). During a 1000 Hz profile,
# the main thread converts text through 8 such modules in turn, so they
# come and go, while another thread runs code outside every object, so
# each of its samples looks its address up in every loaded object, past
# the ones just unloaded. The host must finish (old builds read the
# unmapped program headers of a gone module in the handler and crashed
# within a second), and the profile must hold both threads' CPU.
. "$TOP/test/integration/lib.sh"

export PPROF_CPU_HZ=1000
# The profile must cover the host's first seconds: the server starts in
# the constructor, not after PPROF_START_DELAY_MS.
PPROF_START_DELAY_MS=0 start_agent iconv "$BUILD/test/programs/hostile" iconv 6
fetch 'debug/pprof/profile?seconds=4' > "$WORK/cpu.pb.gz" &
curl_pid=$!
wait_exit "$PID" 30
[ "$STATUS" = 0 ] || { cat "$WORK/iconv.err" >&2; fail "host exited with $STATUS"; }
conversions=$(sed -n 's/^conversions=//p' "$WORK/iconv.out")
[ "${conversions:-0}" -gt 1000 ] || fail "host converted ${conversions:-nothing}"
wait "$curl_pid" || fail "the profile request failed"
top=$(pprof -top -unit=ms "$WORK/cpu.pb.gz")
total=$(printf '%s\n' "$top" | sed -n 's/.* of \([0-9.]*\)ms total.*/\1/p')
note "$conversions conversions; profile total ${total:-0} ms of 4 s on 2 busy threads"
awk -v t="${total:-0}" 'BEGIN { exit !(t >= 3000) }' \
    || { printf '%s\n' "$top" >&2; fail "only ${total:-0} ms of CPU in the profile"; }
expect_contains "$top" "run_iconv" "CPU profile"
echo ok
