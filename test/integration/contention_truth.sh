# Contention truth: a thread holds a mutex inside holder_work for 20 ms at a
# time while two threads wait for it inside waiter_work, and the program
# measures the waiters' time itself. With every charge recorded
# (PPROF_MUTEX_FRACTION=1), mutex puts that delay on holder_work and block
# on waiter_work, each within 20% of the measured time; waits on a
# condition variable, an rwlock and a semaphore appear in block. Then the
# same program at the default settings: the attribution holds, the text
# forms are Go's, a delta covers only its window.
. "$TOP/test/integration/lib.sh"

prog="$BUILD/test/programs/contention_truth"

wait_done() { # NAME
    for i in $(seq 300); do grep -q '^done' "$WORK/$1.out" && return 0; sleep 0.1; done
    cat "$WORK/$1.err" >&2; fail "$1 did not finish its waits"
}

# flat_ms TOP_OUTPUT FUNCTION: the flat value (ms) of FUNCTION in -top -unit=ms.
PPROF_MUTEX_FRACTION=1 start_agent exact "$prog" 40
wait_done exact
measured_ms=$(sed -n 's/^mutex_wait_ns=//p' "$WORK/exact.out" | awk '{ printf "%.2f", $1 / 1e6 }')
note "waiters measured $measured_ms ms in pthread_mutex_lock"
awk -v m="$measured_ms" 'BEGIN { exit !(m > 500) }' || fail "the waiters hardly waited ($measured_ms ms): the test measures nothing"

mutex=$(pprof -top -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/mutex")
echo "$mutex"
within 20 "$(flat_ms "$mutex" holder_work)" "$measured_ms" "mutex delay on holder_work"
# A waiter that gets the lock while the other still waits is itself a
# holder for a moment (and wake-up latency lands there): a few percent.
w=$(flat_ms "$mutex" waiter_work); w=${w:-0}
awk -v w="$w" -v m="$measured_ms" 'BEGIN { exit !(w < m * 0.1) }' || fail "mutex charges waiter_work $w ms"

block=$(pprof -top -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/block")
echo "$block"
within 20 "$(flat_ms "$block" waiter_work)" "$measured_ms" "block delay on waiter_work"
h=$(flat_ms "$block" holder_work); h=${h:-0}
awk -v h="$h" 'BEGIN { exit !(h < 50) }' || fail "block charges holder_work $h ms"
# Phase 2: ten waits of about 10 ms on every primitive, each within 20% of
# the time the program measured around its own calls.
for f in cond rwlock sem; do
    case $f in
        cond) fn=cond_waiter_work ;;
        rwlock) fn=rwlock_reader_work ;;
        sem) fn=sem_waiter_work ;;
    esac
    m=$(sed -n "s/^${f}_wait_ns=//p" "$WORK/exact.out")
    [ -n "$m" ] || fail "the program did not print ${f}_wait_ns"
    m_ms=$(awk -v n="$m" 'BEGIN { printf "%.2f", n / 1e6 }')
    within 20 "$(flat_ms "$block" $fn)" "$m_ms" "block delay on $fn"
done

# Counts: every wait in the block profile is at least the rate, so the
# contentions equal the number of waits: 10 per phase-2 primitive.
counts=$(pprof -top -sample_index=contentions "http://$ADDR/debug/pprof/block")
printf '%s\n' "$counts" | grep -Eq '^ +10 .* sem_waiter_work$' || { echo "$counts"; fail "sem_waiter_work does not have 10 contentions"; }

# Proto shape as Go's: sample types and period type.
raw=$(pprof -raw "http://$ADDR/debug/pprof/mutex")
expect_contains "$raw" "PeriodType: contentions count"
expect_contains "$raw" "Period: 1"
expect_contains "$raw" "contentions/count delay/nanoseconds"

# Text forms.
text=$(fetch debug/pprof/block?debug=1)
expect_contains "$text" "--- contention:"
expect_contains "$text" "cycles/second=1000000000"
expect_contains "$text" "waiter_work+0x"
text=$(fetch debug/pprof/mutex?debug=1)
expect_contains "$text" "--- mutex:"
expect_contains "$text" "sampling period=1"
expect_contains "$text" "holder_work+0x"
# The text forms leave out the agent's own frames (its thread start
# wrapper) as the proto does: the same frames in both.
for kind in block mutex; do
    expect_not_contains "$(fetch "debug/pprof/$kind?debug=1")" "thread_start" "$kind?debug=1"
    expect_not_contains "$(pprof -raw "http://$ADDR/debug/pprof/$kind")" "thread_start" "$kind proto"
done

# Index shows both profiles and the rates in force.
index=$(fetch debug/pprof/)
expect_contains "$index" "href='block?debug=1'>block</a>"
expect_contains "$index" "href='mutex?debug=1'>mutex</a>"
expect_contains "$index" "<tr><td>PPROF_MUTEX_FRACTION</td><td>1</td>"

# A delta over a quiet window is empty (the program only sleeps now).
fetch 'debug/pprof/block?seconds=1' > "$WORK/delta.pb.gz"
delta=$(pprof -raw "$WORK/delta.pb.gz")
expect_not_contains "$delta" "waiter_work" "the block delta profile"
stop "$PID"

# Default settings: the holder is still the one charged, the waiter the one
# blocked (a sampled estimate: only the attribution is checked). With 1 in
# 20 charges recorded, 150 rounds leave a 5e-4 chance of no sample at all.
start_agent defaults "$prog" 150
wait_done defaults
mutex=$(pprof -top -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/mutex")
echo "$mutex"
h=$(flat_ms "$mutex" holder_work)
[ -n "$h" ] || fail "default mutex profile lacks holder_work"
w=$(flat_ms "$mutex" waiter_work); w=${w:-0}
awk -v h="$h" -v w="$w" 'BEGIN { exit !(h > 10 * w) }' || fail "default mutex: holder_work $h ms vs waiter_work $w ms"
block=$(pprof -top -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/block")
expect_contains "$block" "waiter_work" "default block profile"
stop "$PID"
echo ok
