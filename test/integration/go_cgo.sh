# A Go program built with cgo (test/programs/go_cgo), dynamically linked so
# the agent is preloaded into it, serving Go's own net/http/pprof. Go's
# runtime handles SIGPROF and every real-time signal, so the agent chains
# in front of one of Go's handlers (agent/host/signals.h). With Go's own CPU
# profile running at the same time:
#  - the agent's CPU profile answers 200 and names the C functions the
#    burner thread runs (c_hot_a, c_hot_b), and the Go burner's Go frames
#    walked on its goroutine stack (main.goBurn); their shares match the split
#    the program measured with the thread's CPU clock, and the C and the
#    Go burner threads' shares of the two match their CPU clocks (within
#    a point plus 3.5 standard errors: see share_check); the C thread's total and the whole profile's match
#    the thread's clock and the process's CPU (/proc) roughly (see
#    roughly(): nothing of Go's counted twice, nothing large lost);
#  - Go's own profile answers with main.goHot, matching the Go thread's
#    clock as roughly (the agent's signals never reach Go's profiler);
#  - the program's os/signal handlers receive SIGUSR1 during both profiles,
#    and the real-time signal the agent chained on;
# the agent's wall profile and threads dump show the running C thread's
# C frames; SIGUSR2 ends the program with its own status, 7.
. "$TOP/test/integration/lib.sh"

need_go 26
export GOTOOLCHAIN=local GOFLAGS=-mod=mod
note "building the cgo program"
(cd "$TOP/test/programs/go_cgo" && nice "$GO" build -o "$WORK/go_cgo" .) ||
    fail "go build of test/programs/go_cgo"
readelf -d "$WORK/go_cgo" | grep -q NEEDED || fail "go_cgo is not dynamically linked"

export PPROF_CPU_HZ=250
start_agent gocgo "$WORK/go_cgo"
wait_until "the program's pprof line" grep -q '^pprof=' "$WORK/gocgo.out"
GOADDR=$(sed -n 's/^pprof=//p' "$WORK/gocgo.out")
note "Go's own net/http/pprof on $GOADDR"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
now() { date +%s.%N; }
# roughly GOT MS SECS W0 W1 WHAT: GOT (ms, from a profile of SECS) against
# MS, measured over the wall-clock window W0..W1 that encloses the profile
# and also holds the requests' start and the encoding of the answer (a
# second or more on a loaded machine, while the burners go on): GOT is at
# most MS + 5% (nothing counted twice), and at least 75% of MS scaled to
# the profile's length (nothing large lost; how fast the burners ran
# inside and outside the profile differs on a loaded machine).
roughly() {
    awk -v g="$1" -v m="$2" -v d="$3" -v w0="$4" -v w1="$5" -v what="$6" 'BEGIN {
        s = m * d / (w1 - w0)
        printf "# %s: %.0f ms in the profile; measured %.0f ms over %.2f s, %.0f ms over the profile'"'"'s %.2f s\n", what, g, m, w1 - w0, s, d
        exit !(g != "" && g <= m * 1.05 && g >= s * 0.75) }' ||
        fail "$6: ${1:-nothing} ms in the profile, $2 ms measured over the window"
}
# "c_a c_b go c_tid go_tid": ns of the C thread's CPU in c_hot_a and
# c_hot_b, the Go thread's CPU, the two thread ids.
figures() { host_figures gocgo c_a; }

set -- $(figures); a0=$1; b0=$2; g0=$3; ctid=$4
t0=$(cpu_ticks); w0=$(now)
curl -sS --max-time 120 -o "$WORK/go.pb.gz" -w '%{http_code}' \
    "http://$GOADDR/debug/pprof/profile?seconds=24" >"$WORK/go.status" &
gocurl=$!
curl -sS --max-time 120 -o "$WORK/cpu.pb.gz" -w '%{http_code}' \
    "http://$ADDR/debug/pprof/profile?seconds=20" >"$WORK/cpu.status" &
agentcurl=$!
# Mid-profile: the program's own signals still reach it.
sleep 3
set -- $(figures)
[ "$4" = "$ctid" ] || fail "SIGUSR1 during the profiles: no figures from the program"
# A refusal comes at once (curl writes the status when it ends).
status=$(cat "$WORK/cpu.status")
[ -z "$status" ] || [ "$status" = 200 ] ||
    { cat "$WORK/cpu.pb.gz" >&2; echo >&2; fail "the agent's CPU profile answered $status"; }
wait_until "the agent's chained signal in its log" grep -q 'chained in front' "$WORK/gocgo.err"
sig=$(sed -n 's/.*signal \([0-9]*\) chained.*/\1/p' "$WORK/gocgo.err" | head -n 1)
kill -s "$sig" "$PID"
wait_until "the program's handler of signal $sig" grep -q "^rt=$sig\$" "$WORK/gocgo.out"
note "signal $sig (chained by the agent) reached the program's os/signal handler"

wait "$agentcurl" || fail "the agent's CPU profile request failed"
set -- $(figures); a1=$1; b1=$2; g1=$3
t1=$(cpu_ticks); w1=$(now)
wait "$gocurl" || fail "Go's CPU profile request failed"
set -- $(figures); g2=$3; w2=$(now)
status=$(cat "$WORK/cpu.status")
[ "$status" = 200 ] || { cat "$WORK/cpu.pb.gz" >&2; echo >&2; fail "the agent's CPU profile answered $status"; }
[ "$(cat "$WORK/go.status")" = 200 ] || fail "Go's own CPU profile answered $(cat "$WORK/go.status")"

# The agent's profile: the C functions, their split, their total.
top=$(pprof -top -cum -unit=ms -nodecount=200 "$WORK/cpu.pb.gz")
echo "$top" | head -n 16
pa=$(top_cum "$top" c_hot_a)
pb=$(top_cum "$top" c_hot_b)
[ -n "$pa" ] && [ -n "$pb" ] || fail "c_hot_a or c_hot_b missing from the agent's profile"
# Go code is walked on its goroutine stack: main.goHot's samples go on to
# main.goBurn (through goRound's frame pointer) and runtime.goexit.
expect_contains "$top" "main.goBurn" "the agent's profile (Go frames walked)"
expect_contains "$top" "runtime.goexit" "the agent's profile (Go frames walked)"
# share_check NAME GOT_MS OTHER_MS WANT_PERCENT: NAME's share of the two
# in the profile against WANT, within 1 point plus 3.5 standard errors of
# a share drawn from that many signals: on a loaded machine a burner gets a
# few hundred, not thousands, and a signal delivered late stands for the
# periods it missed (4 ms each at 250 Hz; the profile's note says how many
# samples its signals made: $weight a signal on average).
signals=$(profile_note cpu | sed -n 's/^\([0-9]*\) samples.*/\1/p')
nsamples=$(pprof -top -sample_index=samples -nodecount=1 "$WORK/cpu.pb.gz" | sed -n 's/.* of \([0-9]*\) total.*/\1/p' | head -n 1)
weight=$(awk -v s="$nsamples" -v n="$signals" 'BEGIN { w = (n > 0 ? s / n : 1); printf "%.2f", (w < 1 ? 1 : w) }')
note "profile: $nsamples samples from $signals signals ($weight a signal)"
share_check() {
    awk -v name="$1" -v a="$2" -v b="$3" -v m="$4" -v w="$weight" 'BEGIN {
        n = (a + b) / 4 / w; p = a / (a + b) * 100
        tol = 1 + 3.5 * sqrt(m * (100 - m) / (n > 0 ? n : 1))
        d = p - m; if (d < 0) d = -d
        printf "# %s: %.2f%% in the profile (%d signals), %.2f%% measured; allowed %.1f points\n", name, p, n, m, tol
        exit (d <= tol ? 0 : 1) }' || fail "$1: its share in the profile is off the measured one"
}
share_check c_hot_a "$pa" "$pb" "$(awk -v a0="$a0" -v a1="$a1" -v b0="$b0" -v b1="$b1" 'BEGIN {
    printf "%.2f", (a1 - a0) / ((a1 - a0) + (b1 - b0)) * 100 }')"
# The two burner threads' shares of the pair, against their clocks (the
# same window for both: what the load did to the window is no matter).
tags=$(pprof -tags -unit=ms "$WORK/cpu.pb.gz")
echo "$tags"
tc=$(printf '%s\n' "$tags" | awk '$NF == "c-burner" { v = $1; sub(/ms$/, "", v); print v }')
tg=$(printf '%s\n' "$tags" | awk '$NF == "go-burner" { v = $1; sub(/ms$/, "", v); print v }')
[ -n "$tc" ] && [ -n "$tg" ] || fail "the c-burner or go-burner thread missing from the agent's profile"
cms=$(awk -v a0="$a0" -v a1="$a1" -v b0="$b0" -v b1="$b1" 'BEGIN { printf "%.0f", (a1 - a0 + b1 - b0) / 1e6 }')
gms=$(awk -v g0="$g0" -v g1="$g1" 'BEGIN { printf "%.0f", (g1 - g0) / 1e6 }')
share_check "the c-burner thread (of the two burners)" "$tc" "$tg" \
    "$(awk -v mc="$cms" -v mg="$gms" 'BEGIN { printf "%.2f", mc / (mc + mg) * 100 }')"
secs=$(profile_seconds "$WORK/cpu.pb.gz")
roughly "$(awk -v a="$pa" -v b="$pb" 'BEGIN { print a + b }')" "$cms" "$secs" "$w0" "$w1" \
    "the C thread's CPU (its clock)"
total=$(pprof -top -unit=ms -nodecount=1 "$WORK/cpu.pb.gz" | sed -n 's/.* of \([0-9.]*\)ms total.*/\1/p' | head -n 1)
pms=$(awk -v t0="$t0" -v t1="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", (t1 - t0) * 1000 / hz }')
roughly "$total" "$pms" "$secs" "$w0" "$w1" "the process's CPU (/proc)"

# Go's own profile: Go's function names, and the Go thread's CPU.
gtop=$(pprof -top -cum -unit=ms -nodecount=200 "$WORK/go.pb.gz")
echo "$gtop" | head -n 10
gh=$(top_cum "$gtop" main.goHot)
[ -n "$gh" ] || fail "main.goHot missing from Go's own profile"
roughly "$gh" "$(awk -v g0="$g0" -v g2="$g2" 'BEGIN { printf "%.0f", (g2 - g0) / 1e6 }')" \
    "$(profile_seconds "$WORK/go.pb.gz")" "$w0" "$w2" "Go's own profile of main.goHot (the Go thread's clock)"

# The wall profile and the threads dump: the running C thread's C frames.
status=$(curl -sS --max-time 120 -o "$WORK/wall.pb.gz" -w '%{http_code}' "http://$ADDR/debug/pprof/wall?seconds=2")
[ "$status" = 200 ] || fail "the agent's wall profile answered $status"
wtop=$(pprof -top -cum -sample_index=wall -nodecount=200 "$WORK/wall.pb.gz")
expect_contains "$wtop" c_burn "the wall profile"
fetch "debug/pprof/goroutine?debug=2" >"$WORK/threads.txt"
awk -v t="$ctid" '/^goroutine / { on = ($2 == t) } on' "$WORK/threads.txt" >"$WORK/cthread.txt"
cat "$WORK/cthread.txt"
grep -q '^c_hot_[ab](' "$WORK/cthread.txt" || fail "the C thread's stack in the threads dump lacks c_hot_a/c_hot_b"

# The program's exit is its own.
kill -USR2 "$PID"
wait_exit "$PID" 30
[ "$STATUS" = 7 ] || fail "exit status $STATUS, the program exits with 7"
grep -q '^exiting 7' "$WORK/gocgo.out" || fail "the program did not say it was exiting"
note "exit status 7, as the program chose"
echo ok
