# Hosts that block signals and read them themselves (signalfd, sigwait) as
# event loops do: during a CPU profile and a threads dump they read only
# the signals they are sent. A thread that blocks the profiling signal has
# no armed timer, whether it blocked it before the profile, during it (the
# whole-run profile of PPROF_DUMP_DIR arms the main thread before main), or
# inherited the mask from its creator; one that unblocks it is profiled,
# and the profile's share of its function matches its own CPU time.
. "$TOP/test/integration/lib.sh"

H="$BUILD/test/programs/sigblock_host"
export PPROF_CPU_HZ=250

# end_host NAME: sends SIGUSR1 (read through the host's own reader) and
# expects "signals ok" and exit 0.
end_host() {
    kill -USR1 "$PID"
    wait_exit "$PID" 20
    grep -v '^free_cpu_ns=' "$WORK/$1.out" || true
    [ "$STATUS" = 0 ] || fail "$1: host exited with $STATUS: $(grep -v '^free_cpu_ns=' "$WORK/$1.out" | tail -n 3)"
    grep -qx 'signals ok' "$WORK/$1.out" || fail "$1: no 'signals ok'"
}

# wait_line NAME LINE: waits until the host printed LINE.
wait_line() {
    for i in $(seq 100); do grep -qx "$2" "$WORK/$1.out" && return 0; sleep 0.05; done
    fail "$1: no '$2'"
}

# 1. One thread, every signal blocked before the profile, read by signalfd
#    (at the default log level) and by sigtimedwait (at PPROF_LOG=debug);
#    the threads dump meanwhile.
for reader in signalfd sigwait; do
    if [ "$reader" = sigwait ]; then export PPROF_LOG=debug; told=2; else unset PPROF_LOG; told=1; fi
    start_agent "single_$reader" "$H" single "$reader"
    wait_line "single_$reader" blocked
    fetch 'debug/pprof/profile?seconds=2' > "$WORK/single.pb.gz"
    # The one thread blocks the signal: the profile, /debug/stats and the
    # log say that it was not profiled (apache2's event MPM: an empty
    # profile with no word why).
    expect_contains "$(pprof -comments "$WORK/single.pb.gz")" "1 threads block signal" "the profile's comments"
    expect_contains "$(fetch debug/stats)" '"cpu_profile_threads_unseen": 1' "/debug/stats"
    grep -q "1 threads block signal .*not in the profile" "$WORK/single_$reader.err" || fail "log: $(cat "$WORK/single_$reader.err")"
    # A second profile in the same situation says it again in its comments;
    # the log said it once for the process, and repeats it only at
    # PPROF_LOG=debug (a long-lived service's log is not one line a profile).
    fetch 'debug/pprof/profile?seconds=1' > "$WORK/single2.pb.gz"
    expect_contains "$(pprof -comments "$WORK/single2.pb.gz")" "1 threads block signal" "the second profile's comments"
    n=$(grep -c "1 threads block signal .*not in the profile" "$WORK/single_$reader.err")
    [ "$n" = "$told" ] || fail "log (PPROF_LOG=${PPROF_LOG:-unset}): said $n times over two profiles, not $told: $(grep 'block signal' "$WORK/single_$reader.err")"
    fetch 'debug/pprof/goroutine?debug=2' > "$WORK/single.threads"
    grep -q 'sigblock_host' "$WORK/single.threads" || fail "threads dump: $(head -c 400 "$WORK/single.threads")"
    end_host "single_$reader"
done
unset PPROF_LOG

# 2. Blocked during the profile: the main thread burns 1.5 s unblocked, then
#    blocks everything while the profile keeps running.
start_agent late "$H" single signalfd 1500
fetch 'debug/pprof/profile?seconds=3' > "$WORK/late.pb.gz"
top=$(pprof -traces "$WORK/late.pb.gz")
echo "$top" | head -n 8
expect_contains "$top" "early_burn" "profile before the block"
expect_not_contains "$top" "blocked_burn" "profile after the block"
end_host late

# 3. The whole-run profile of PPROF_DUMP_DIR starts in the constructor, so
#    the main thread's timer is armed before main blocks every signal.
mkdir -p "$WORK/dumps"
PPROF_DUMP_DIR="$WORK/dumps" start_agent dumped "$H" single signalfd
wait_line dumped blocked
sleep 2
end_host dumped

# 4. A thread that blocks only SIGUSR1 and SIGTERM and waits in a read of
#    a signalfd for every signal: a threads dump must not ask it (the read
#    would return the question).
start_agent reader "$H" reader signalfd
wait_line reader reading
for i in 1 2; do fetch 'debug/pprof/goroutine?debug=2' > "$WORK/reader.threads"; done
grep -q 'read' "$WORK/reader.threads" || fail "threads dump: $(head -c 400 "$WORK/reader.threads")"
end_host reader

# 5. Threads: main and short-lived children (which inherit its mask) block
#    everything and read it; "free" unblocks SIGPROF, burns in free_burn,
#    blocks it again for a while (pause_burn), and so on.
start_agent threads "$H" threads signalfd
sleep 0.5
t0=$(date +%s.%N)
fetch 'debug/pprof/profile?seconds=4' > "$WORK/threads.pb.gz"
for i in 1 2 3; do fetch 'debug/pprof/goroutine?debug=1' > /dev/null; done
end_host threads
traces=$(pprof -traces "$WORK/threads.pb.gz")
top=$(pprof -top -cum -nodecount=40 "$WORK/threads.pb.gz")
echo "$top" | head -n 12
expect_contains "$traces" "free_burn" "profile of the thread that unblocks SIGPROF"
expect_not_contains "$traces" "blocked_burn" "profile of the blocked main thread"
expect_not_contains "$traces" "child_burn" "profile of the blocked children"
expect_not_contains "$traces" "pause_burn" "profile of the paused thread"
# free_burn's CPU time in the profile against what the thread measured of
# itself in free_burn over the profile's window: from the request (t0) for
# the profile's duration, read off the thread's own reports (every 50 ms).
duration=$(printf '%s\n' "$top" | sed -n 's/^Duration: \([0-9.]*\)s.*/\1/p')
measured_ms=$(awk -v t0="$t0" -v d="${duration:-4}" '
    /^free_cpu_ns=/ {
        split($1, a, "="); split($2, b, "=")
        if (b[2] + 0 <= t0) before = a[2]
        if (b[2] + 0 <= t0 + d) after = a[2] }
    END { printf "%d", (after - before) / 1000000 }' "$WORK/threads.out")
profiled_ms=$(echo "$top" | awk '$NF == "free_burn" {
    v = $4; if (v ~ /ms$/) {sub(/ms$/, "", v); print v + 0}
    else if (v ~ /s$/) {sub(/s$/, "", v); print v * 1000} }')
note "free_burn: ${profiled_ms:-0} ms in the profile, ${measured_ms} ms of the thread's own CPU time meanwhile"
# At 250 Hz a sample stands for 4 ms: the profile may exceed the thread's
# own time by sampling noise only (4 sigma of the expected sample count),
# and must hold at least half of it. A thread starved by a busy machine
# leaves too few samples to judge.
awk -v p="${profiled_ms:-0}" -v m="$measured_ms" 'BEGIN {
    if (m < 100) { print "# too little CPU to compare (" m " ms)"; exit 0 }
    hi = m + 4 * sqrt(m / 4) * 4
    printf "# ratio profile/measured %.2f (accepted 0.50-%.2f)\n", p / m, hi / m
    exit !(p >= m / 2 && p <= hi) }' || fail "free_burn: profile ${profiled_ms:-0} ms vs measured ${measured_ms} ms"
echo ok
