# The C library loads and unloads objects of its own, past any dlclose the
# agent sees: iconv's gconv modules (and NSS's). During a 1000 Hz profile,
# the main thread converts text through 8 such modules in turn, so they
# come and go, while another thread runs code outside every object, so
# each of its samples looks its address up in every loaded object, past
# the ones just unloaded. The host must finish (old builds read the
# unmapped program headers of a gone module in the handler and crashed
# within a second), and the profile must hold at least 80% of the CPU
# time the host's two threads measured of themselves meanwhile (its truth
# on a busy machine).
. "$TOP/test/integration/lib.sh"

export PPROF_CPU_HZ=1000
# The server starts in the constructor, not after PPROF_START_DELAY_MS: the
# profile runs while the host's gconv modules come and go.
PPROF_START_DELAY_MS=0 start_agent iconv "$BUILD/test/programs/hostile" iconv 8
fetch 'debug/pprof/profile?seconds=4' > "$WORK/cpu.pb.gz" || fail "the profile request failed"
wait_exit "$PID" 30
[ "$STATUS" = 0 ] || { cat "$WORK/iconv.err" >&2; fail "host exited with $STATUS"; }
conversions=$(sed -n 's/^conversions=//p' "$WORK/iconv.out")
[ "${conversions:-0}" -gt 1000 ] || fail "host converted ${conversions:-nothing}"
top=$(pprof -top -unit=ms "$WORK/cpu.pb.gz")
total=$(printf '%s\n' "$top" | sed -n 's/.* of \([0-9.]*\)ms total.*/\1/p')
# Truth: the CPU time the host's two threads measured of themselves (the
# host prints it every 50 ms with the time) between its first and last
# reading inside the profile's window (Time and Duration of the profile).
raw=$(pprof -raw "$WORK/cpu.pb.gz")
start=$(date -d "$(printf '%s\n' "$raw" | sed -n 's/^Time: \(.*\) UTC$/\1/p')" +%s%N)
dur=$(printf '%s\n' "$raw" | sed -n 's/^Duration: //p')
used=$(awk -v s="$start" -v d="$dur" '
    BEGIN { e = s + d * 1e9 }
    /^t=/ { t = substr($1, 3) + 0; c = substr($2, 8) + 0
            if (t >= s + 0 && t <= e) { if (first == "") first = c; last = c } }
    END { print (first == "" ? 0 : last - first) }' "$WORK/iconv.out")
note "$conversions conversions; profile total ${total:-0} ms; the host's threads used $used ms of CPU in the profile's window"
[ "$used" -ge 200 ] || fail "the host used only $used ms of CPU during the profile: nothing to compare"
awk -v t="${total:-0}" -v u="$used" 'BEGIN { exit !(t >= 0.8 * u) }' \
    || { printf '%s\n' "$top" >&2; fail "only ${total:-0} ms of the host's $used ms of CPU in the profile"; }
expect_contains "$top" "run_iconv" "CPU profile"
echo ok
