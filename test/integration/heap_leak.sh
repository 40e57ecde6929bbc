# Leaks among churn: heap?min_age=N names the leaking function, and the
# bytes it shows are what the program leaked more than N seconds ago by its
# own count; a full heap profile does not (young live memory dominates it),
# and labels live samples with their age bucket.
#
# The case is 1 KiB/s leaked among 100 MB/s of churn, min_age=60,
# after 3 minutes, at the default rate. What decides the answer is (a) that
# no churned block is old enough (here churned blocks live microseconds and
# the "recent" ones 0.5 s, both far below min_age), and (b) how many samples
# the old leaked bytes get: about old leaked bytes / rate for blocks much
# smaller than the rate. The test keeps (a) and gets (b) in seconds: 64 KiB/s,
# min_age=3 and PPROF_HEAP_RATE=4096 give about 80 old leak samples after
# 8 s (the figures give 120 KiB / 512 KiB = 0.23: see docs/memory.md).
. "$TOP/test/integration/lib.sh"

export PPROF_HEAP_RATE=4096
LEAK=65536

# leaked_at MS: the program's own count of bytes leaked by its time MS.
leaked_at() {
    awk -v t="$1" '$1 == "leaked" && $2 <= t { b = $3 } END { print b + 0 }' "$WORK/leak.out"
}
# now_ms: the program's latest time stamp.
now_ms() {
    awk '$1 == "leaked" { t = $2 } END { print t + 0 }' "$WORK/leak.out"
}
# share FUNC FILE: FUNC's flat share of a profile's total, from pprof -top.
share() {
    pprof -top -unit=B "$2" | awk -v f="$1" '
        /accounting for/ { for (i = 1; i <= NF; i++) if ($i == "total") { t = $(i - 1); sub(/B$/, "", t) } }
        $NF == f { v = $1; sub(/B$/, "", v) }
        END { printf "%.3f %d\n", (t > 0 ? v / t : 0), v }'
}

start_agent leak "$BUILD/test/programs/leak_churn" "$LEAK" 20 120
while [ "$(now_ms)" -lt 8000 ]; do
    kill -0 "$PID" 2>/dev/null || fail "leak_churn exited"
    sleep 0.2
done

before=$(now_ms)
fetch 'debug/pprof/heap?min_age=3' > "$WORK/old.pb.gz"
after=$(now_ms)
set -- $(share leak_slowly "$WORK/old.pb.gz")
old_share=$1 old_bytes=$2
# Leaked more than 3 s before the profile was taken (between the two
# stamps around the request), by the program's own clock.
lo=$(leaked_at $((before - 3000 - 200)))
hi=$(leaked_at $((after - 3000 + 200)))
note "min_age=3: leak_slowly ${old_share} of the profile, ${old_bytes} B; the program leaked $lo..$hi B more than 3 s before"
awk -v s="$old_share" 'BEGIN { exit !(s >= 0.9) }' \
    || { pprof -top "$WORK/old.pb.gz" >&2; fail "min_age=3 does not name leak_slowly as >= 90% ($old_share)"; }
# About 80 samples: a relative standard error near 11%; 0.6..1.5 is 4 of them.
awk -v b="$old_bytes" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(b >= 0.6 * lo && b <= 1.5 * hi) }' \
    || fail "min_age=3 shows $old_bytes B of leak_slowly; the program leaked $lo..$hi B that long ago"

# Without min_age the young blocks dominate: the filter is what names the leak.
fetch debug/pprof/heap > "$WORK/all.pb.gz"
set -- $(share leak_slowly "$WORK/all.pb.gz")
note "full heap: leak_slowly $1 of the profile"
awk -v s="$1" 'BEGIN { exit !(s < 0.5) }' || fail "the full heap profile already names the leak ($1): the test shows nothing"

# Age labels on the full profile: everything here is under a minute old.
raw=$(pprof -raw "$WORK/all.pb.gz")
expect_contains "$raw" "age:[0-1m]" "the heap profile's labels"
young=$(pprof -top -tagfocus 'age=0-1m' "$WORK/all.pb.gz")
expect_contains "$young" "keep_recent" "-tagfocus age=0-1m"
old=$(go tool pprof -top -tagfocus 'age=1h\+' "$WORK/all.pb.gz" 2>&1 || true)
expect_not_contains "$old" "keep_recent" "-tagfocus age=1h+"

# debug=1 text: the leak's record first, the filter said in the trailer.
text=$(fetch 'debug/pprof/heap?min_age=3&debug=1')
expect_contains "$text" "# min_age=3000ms"
printf '%s\n' "$text" | sed -n 3p | grep -q 'leak_slowly' \
    || { printf '%s\n' "$text" | head -5 >&2; fail "debug=1 min_age=3 does not list leak_slowly first"; }

# seconds=N: the change of the old set over 2 s is the leak's growth.
fetch 'debug/pprof/heap?min_age=3&seconds=2' > "$WORK/delta.pb.gz"
set -- $(share leak_slowly "$WORK/delta.pb.gz")
note "min_age=3 seconds=2: leak_slowly $1 of the delta, $2 B (the program leaks $((LEAK * 2)) B in 2 s)"
awk -v s="$1" 'BEGIN { exit !(s >= 0.9) }' || fail "the min_age delta does not name leak_slowly ($1)"

[ "$(http_status 'debug/pprof/heap?min_age=abc')" = 400 ] || fail "min_age=abc is not 400"
[ "$(http_status 'debug/pprof/heap?min_age=-1')" = 400 ] || fail "min_age=-1 is not 400"
stop "$PID"
