# A running trace's memory is made present ahead of its writers by the
# session's thread (agent/trace/trace_rec.c, trace_fill_ahead): the host's
# thread that makes the calls takes (almost) no page fault for the records
# it writes. Before, it took one per 4 KiB of records, in the middle of
# the call being recorded: 9,809 faults in 500,000 traced reads (about 14
# us each on the virtual machine this was measured on).
#
# The truth is the thread's own fault count (getrusage RUSAGE_THREAD) over
# its reads. Each read's record is at least 48 bytes (a 40-byte event and
# one frame), so a writer left to fault would take at least
# READS * 48 / 4096 faults; the thread must take under a quarter of that.
. "$TOP/test/integration/lib.sh"

READS=200000
start_agent reads "$BUILD/test/programs/trace_bench" read $READS wait
fetch "debug/pprof/trace?seconds=5" -o "$WORK/trace" &
CURL=$!
i=0
until grep -q '^ns_per_call' "$WORK/reads.out" 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 1200 ] || fail "the reads never ended"
    sleep 0.1
done
wait "$CURL" || fail "the trace request failed"
stop "$PID"
line=$(grep '^ns_per_call' "$WORK/reads.out")
note "$line"
expect_contains "$line" "traced=1" "the reads' report"
faults=$(printf '%s\n' "$line" | sed -n 's/.*faults=\([0-9]*\).*/\1/p')
least=$((READS * 48 / 4096))
note "thread faults $faults; a writer left to fault takes at least $least"
[ "$((faults * 4))" -lt "$least" ] ||
    fail "the recording thread took $faults page faults (at least $least without the memory made present ahead)"
echo ok
