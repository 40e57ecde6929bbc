# The malloc and free fast paths stay at their measured floor: callgrind
# counts the instructions of heap_bench's loop of malloc(64) + write +
# free pairs (the loop alone, --toggle-collect) with and without the agent
# at the default rate. The interposers' fast paths are 5 + 6 instructions
# (docs/memory.md has the disassembly) and sampling adds about 0.2 per
# pair on average once the unwind tables are built (PPROF_START_DELAY_MS=0,
# as in a process that has run for a second). The bound, 12, fails the 16
# the fast paths took before they were cut, and any instruction added.
. "$TOP/test/integration/lib.sh"

command -v valgrind >/dev/null || fail "valgrind is missing (scripts/install-deps)"
prog="$BUILD/test/programs/heap_bench"
n=300000

# loop PRELOAD: instructions of the pairs loop.
loop() {
    env LD_PRELOAD="$1" PPROF_ADDR=off PPROF_LOG=quiet PPROF_START_DELAY_MS=0 valgrind --tool=callgrind \
        --toggle-collect=pairs --callgrind-out-file="$WORK/cg.out" \
        "$prog" pairs "$n" >/dev/null 2>"$WORK/cg.err" || fail "heap_bench failed under valgrind"
    awk '/^(summary|totals):/ { print $2; exit }' "$WORK/cg.out"
}

base=$(loop "")
with=$(loop "$AGENT")
added=$(awk -v b="$base" -v w="$with" -v n="$n" 'BEGIN { printf "%.2f", (w - b) / n }')
note "per pair: glibc $(awk -v b="$base" -v n="$n" 'BEGIN { printf "%.2f", b / n }'), added by the agent $added"
awk -v b="$base" -v n="$n" 'BEGIN { exit !(b / n > 50) }' || fail "the loop counted too little: the test sees nothing"
awk -v a="$added" 'BEGIN { exit !(a <= 12) }' || fail "the agent adds $added instructions per pair (bound 12)"
echo ok
