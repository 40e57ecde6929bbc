# The cost of an unlock while the agent follows a waiter elsewhere: a
# thread blocks on one mutex (followed: PPROF_MUTEX_FRACTION=1) while the
# main thread locks and unlocks another, free one. Every unlock then knows
# that somebody somewhere waits; it must still cost at most 10 instructions
# more than the same pair with nobody followed (callgrind counts the loop
# only, so the machine's load does not move the figure). It cost 194 more
# when every such unlock looked for a record of its lock.
. "$TOP/test/integration/lib.sh"

command -v valgrind >/dev/null || fail "valgrind is missing (scripts/install-deps)"
prog="$BUILD/test/programs/contention_bench"
n=100000

# per_pair MODE: instructions per lock+unlock pair inside uncontended_loop.
per_pair() {
    env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet \
        PPROF_MUTEX_FRACTION=1 valgrind --tool=callgrind \
        --toggle-collect=uncontended_loop \
        --callgrind-out-file="$WORK/cg.$1" "$prog" "$1" "$n" >/dev/null 2>&1 ||
        fail "contention_bench $1 failed under valgrind"
    awk -v n="$n" '/^totals:/ { printf "%.1f\n", $2 / (n + int(n / 10)) }' "$WORK/cg.$1"
}

free=$(per_pair uncontended)
followed=$(per_pair uncontended_followed)
note "instructions per pair: nobody followed $free, a waiter followed elsewhere $followed"
awk -v a="$free" -v b="$followed" 'BEGIN { exit !(a > 0 && b - a <= 10) }' ||
    fail "an unlock while a waiter is followed elsewhere costs $followed instructions per pair, $free without (more than +10)"
echo "ok"
