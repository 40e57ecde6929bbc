# Contention of locks built on the futex system call (Rust's std, and the
# C++ and C programs' futex-based waits), against what the programs measure
# of themselves: each program prints its waiters' time per primitive
# ("<name>_wait_ns=N") and the test finds it in the profiles, with every
# charge recorded (PPROF_MUTEX_FRACTION=1):
#   block: the waiting function's cumulative delay within 20% of what it
#     measured, and the waiting functions >= 80% of all block delay;
#   mutex: the holding function's cumulative delay within 20% of what its
#     waiters measured, the holders >= 80% of all mutex delay; condition
#     waits (Condvar, std::condition_variable, a futex event) nowhere in
#     mutex.
# Each program also runs without the agent: the same output (the timings
# aside) and the same exit status.
. "$TOP/test/integration/lib.sh"

# cum_ms TOP_OUTPUT FUNCTION: the cumulative value (ms) of FUNCTION in
# -top -cum -unit=ms (the name is the last field, up to its arguments).
cum_ms() {
    printf '%s\n' "$1" | awk -v f="$2" '{ n = $NF; sub(/\(.*$/, "", n) }
        n == f || n ~ ("::" f "$") { v = $4; sub(/ms$/, "", v); print v; exit }'
}

# total_ms TOP_OUTPUT: the profile's total ("... of N ms total").
total_ms() {
    printf '%s\n' "$1" | sed -n 's/.* of \([0-9.]*\)ms total.*/\1/p' | head -n 1
}

# at_least PERCENT PART TOTAL WHAT
at_least() {
    awk -v p="$1" -v a="$2" -v t="$3" 'BEGIN { exit !(a != "" && t > 0 && a >= t * p / 100) }' \
        || fail "$4: ${2:-nothing} ms of $3 ms (under $1%)"
    note "$4: $2 ms of $3 ms"
}

measured_ms() { # NAME PRIMITIVE
    m=$(sed -n "s/^$2_wait_ns=//p" "$WORK/$1.out")
    [ -n "$m" ] || fail "$1 did not print $2_wait_ns"
    awk -v n="$m" 'BEGIN { printf "%.2f", n / 1e6 }'
}

wait_done() { # NAME
    for i in $(seq 600); do grep -q '^done' "$WORK/$1.out" && return 0; sleep 0.1; done
    cat "$WORK/$1.err" >&2; stacks "$PID"; fail "$1 did not finish its waits"
}

# truth NAME PROGRAM "PRIMITIVE:WAITER:HOLDER ..." "CONDITION:WAITER:NOTIFIER ..."
truth() {
    name=$1 prog=$2 locks=$3 conds=$4
    [ -x "$prog" ] || fail "$prog is missing"
    "$prog" 20 /dev/null >"$WORK/$name.plain" 2>&1 && st0=0 || st0=$?

    PPROF_MUTEX_FRACTION=1 start_agent "$name" "$prog" 20 "$WORK/$name.stop"
    wait_done "$name"
    mutex=$(pprof -top -cum -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/mutex")
    block=$(pprof -top -cum -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/block")
    echo "$mutex" | head -n 30
    echo "$block" | head -n 30
    mutex_total=$(total_ms "$mutex"); block_total=$(total_ms "$block")
    holders=0 waiters=0
    for spec in $locks; do
        prim=${spec%%:*} rest=${spec#*:}; waiter=${rest%%:*} holder=${rest#*:}
        m=$(measured_ms "$name" "$prim")
        awk -v m="$m" 'BEGIN { exit !(m > 100) }' || fail "$name: $prim waiters hardly waited ($m ms): the test measures nothing"
        h=$(cum_ms "$mutex" "$holder"); w=$(cum_ms "$block" "$waiter")
        within 20 "$h" "$m" "$name: mutex delay on $holder"
        within 20 "$w" "$m" "$name: block delay on $waiter"
        holders=$(awk -v a="$holders" -v b="$h" 'BEGIN { print a + b }')
        waiters=$(awk -v a="$waiters" -v b="$w" 'BEGIN { print a + b }')
    done
    for spec in $conds; do
        prim=${spec%%:*} rest=${spec#*:}; waiter=${rest%%:*} notifier=${rest#*:}
        m=$(measured_ms "$name" "$prim")
        w=$(cum_ms "$block" "$waiter")
        if [ "$prim" = sem ]; then
            # libstdc++'s atomic wait spins and calls sched_yield a dozen
            # times before its futex wait; only the futex wait is a wait the
            # agent sees, and on a busy machine each yield can give the CPU
            # away for a time slice: 12 of 272 ms were visible beside two
            # CPU hogs when a round held 10 ms. A round now holds 60 ms, so
            # the futex wait is most of it; still, the right function, at
            # least 5%, never more than measured.
            at_least 5 "$w" "$m" "$name: block delay on $waiter"
            within 20 "$(awk -v w="$w" -v m="$m" 'BEGIN { print (w > m ? w : m) }')" "$m" \
                "$name: block delay on $waiter, at most"
        else
            within 20 "$w" "$m" "$name: block delay on $waiter"
        fi
        waiters=$(awk -v a="$waiters" -v b="$w" 'BEGIN { print a + b }')
        n=$(cum_ms "$mutex" "$notifier"); n=${n:-0}
        awk -v n="$n" -v m="$m" 'BEGIN { exit !(n < m * 0.1) }' \
            || fail "$name: mutex charges the notifier $notifier $n ms (its waiters: $m ms)"
    done
    at_least 80 "$holders" "$mutex_total" "$name: holders' share of mutex"
    at_least 80 "$waiters" "$block_total" "$name: waiters' share of block"

    touch "$WORK/$name.stop"
    wait_exit "$PID" 30
    [ "$STATUS" = "$st0" ] || fail "$name: exit status $STATUS under the agent, $st0 without"
    grep -v '_wait_ns=' "$WORK/$name.plain" >"$WORK/$name.want"
    grep -v '_wait_ns=' "$WORK/$name.out" >"$WORK/$name.got"
    cmp -s "$WORK/$name.want" "$WORK/$name.got" || {
        diff "$WORK/$name.want" "$WORK/$name.got" >&2; fail "$name: output differs under the agent"; }
    note "$name: same output and exit status ($STATUS) as without the agent"
}

truth rust "$BUILD/test/programs/futex_truth_rust" \
    "mutex:waiter_work:holder_work rwlock:rw_reader_work:rw_writer_work" \
    "cond:cond_waiter_work:cond_notifier_work"
truth cxx "$BUILD/test/programs/futex_truth_cxx" \
    "mutex:waiter_work:holder_work rwlock:rw_reader_work:rw_writer_work timed:timed_waiter_work:timed_holder_work" \
    "cond:cond_waiter_work:cond_notifier_work sem:sem_waiter_work:sem_release_work"
truth c "$BUILD/test/programs/futex_truth_c" \
    "mutex:waiter_work:holder_work pi:pi_waiter_work:pi_holder_work" \
    "flag:flag_waiter_work:flag_notify_work"

# Default settings (1 futex wait in 20 followed, block rate 100 us): the
# holder is still the one charged most, the waiter the one blocked (a
# sampled estimate: only the attribution is checked). 150 rounds x 2 waiters leave a
# 0.95^300 = 2e-7 chance of no followed wait at all.
start_agent rust_defaults "$BUILD/test/programs/futex_truth_rust" 150 "$WORK/rust_defaults.stop"
wait_done rust_defaults
mutex=$(pprof -top -cum -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/mutex")
h=$(cum_ms "$mutex" holder_work)
[ -n "$h" ] || { echo "$mutex"; fail "default mutex profile lacks holder_work"; }
w=$(cum_ms "$mutex" waiter_work); w=${w:-0}
# The waiters' own brief holds are charged too (Rust's mutex is not fair: a
# waiter that takes the lock first delays the other): 1.8 to 3 times less
# than the holder was seen at these settings, so the check is only that
# the holder is charged more.
awk -v h="$h" -v w="$w" 'BEGIN { exit !(h > w) }' || fail "default mutex: holder_work $h ms vs waiter_work $w ms"
note "defaults: mutex holder_work $h ms, waiter_work $w ms"
block=$(pprof -top -cum -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/block")
expect_contains "$block" "waiter_work" "default block profile"
touch "$WORK/rust_defaults.stop"
wait_exit "$PID" 30
echo ok
