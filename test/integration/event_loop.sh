# An event loop (test/programs/event_loop: bursts of burst_work between
# 200 and 300 us sleeps, as redis's main thread under load):
# - goroutine?debug=2, 20 times: its main thread always has its stack
#   (a blocked thread that moved while its stack was copied is tried
#   again, not given up on);
# - a 5 s wall profile at 100 Hz: its time on a CPU has a stack
#   (burst_work), not [stack unavailable] (its bursts end before its CPU
#   timer fires: the timer's next stack is taken), and so has its time
#   waiting for a CPU; the first few looks, before it is seen to run in
#   bursts, have none: at most half. At the default 20 Hz a run where the
#   loop slept longer than usual was seen awake at six looks, the first of
#   them without a stack by design (this check failed in a CI run).
#   Its running time is its own CPU clock over the profile (0.75 to 1.2
#   times: read around the request, at the rate it ran, for the profile's
#   duration).
. "$TOP/test/integration/lib.sh"
prog="$BUILD/test/programs/event_loop"
[ -x "$prog" ] || fail "$prog is not built"
start_agent loop env PPROF_WALL_HZ=100 PPROF_LOG=debug "$prog"
for i in $(seq 100); do grep -q ready "$WORK/loop.out" && break; sleep 0.05; done

moved=0
for i in $(seq 20); do
    fetch 'debug/pprof/goroutine?debug=2' > "$WORK/threads"
    main=$(awk '/^goroutine .*thread "event_loop"\]:/ {p = 1} /^$/ {p = 0} p' "$WORK/threads")
    case "$main" in
        *"stack unavailable"*) moved=$((moved + 1)); printf '%s\n' "$main" | head -n 3 ;;
        *event_loop*) ;;
        *) printf '%s\n' "$main"; fail "dump $i: the main thread's stack lacks event_loop" ;;
    esac
done
note "threads dumps: $moved of 20 without the main thread's stack"
[ "$moved" -eq 0 ] || fail "$moved of 20 dumps gave up on the main thread's stack"

# The loop's own thread's CPU clock (ticks of its stat) around the profile.
# The request outlasts the profile (its start and its encoding, long on a
# loaded machine): the CPU over the request is taken at the rate it ran,
# for the profile's duration.
cpu0=$(awk '{print $14 + $15}' "/proc/$PID/task/$PID/stat")
t0=$(date +%s%N)
fetch 'debug/pprof/wall?seconds=5' > "$WORK/wall.pb.gz"
t1=$(date +%s%N)
cpu1=$(awk '{print $14 + $15}' "/proc/$PID/task/$PID/stat")
dur=$(pprof -raw "$WORK/wall.pb.gz" | sed -n 's/^Duration: *\([0-9.]*\).*/\1/p')
cpu_ms=$(awk -v c="$(( (cpu1 - cpu0) * 1000 / $(getconf CLK_TCK) ))" -v d="${dur:-0}" \
    -v r="$(( (t1 - t0) / 1000000 ))" 'BEGIN { printf "%.0f", (r > 0 ? c * d * 1000 / r : c) }')
grep -o "wall profile: .*" "$WORK/loop.err" | sed 's/^/# /'
awake=$(pprof -top -unit=ms -nodecount=100000 -tagignore=state=sleeping "$WORK/wall.pb.gz")
printf '%s\n' "$awake" | head -n 14
total=$(printf '%s\n' "$awake" | sed -n 's/^Showing nodes accounting for \([0-9.]*\)ms.*/\1/p')
none=$(printf '%s\n' "$awake" | awk '$NF == "unavailable]" {v = $1; sub(/ms$/, "", v); print v + 0}')
running=$(pprof -top -cum -unit=ms -tagfocus=state=running "$WORK/wall.pb.gz")
burst=$(top_cum "$running" burst_work)
note "awake ${total:-0} ms: without a stack ${none:-0} ms; running in burst_work ${burst:-0} ms"
[ -n "$total" ] && awk -v t="$total" 'BEGIN { exit !(t > 0) }' || fail "the loop was never seen awake"
awk -v t="$total" -v n="${none:-0}" 'BEGIN { exit !(n <= t / 2) }' ||
    fail "${none:-0} of ${total} ms awake have no stack"
[ -n "$burst" ] || fail "no running time in burst_work"
# Its running time is its CPU time, not the share of looks that happened
# to find it awake: the looks fall in step with its wake-ups (docs/wall.md,
# "Awake share"); before, 351 to 1463 ms for 570 to 740 ms measured.
run_ms=$(pprof -top -unit=ms -tagfocus=state=running "$WORK/wall.pb.gz" |
    sed -n 's/^Showing nodes accounting for \([0-9.]*\)ms.*/\1/p')
note "running ${run_ms:-0} ms; the loop's thread measured ${cpu_ms} ms of CPU over the profile's ${dur:-?} s"
awk -v r="${run_ms:-0}" -v c="$cpu_ms" 'BEGIN { exit !(r >= 0.75 * c && r <= 1.2 * c + 20) }' ||
    fail "running ${run_ms:-0} ms for ${cpu_ms} ms of CPU measured"
