# Heap profile truth with PPROF_HEAP_RATE=1 (every allocation recorded):
# for every allocation site of test/programs/heap_truth (live objects,
# churn, frees on another thread, realloc chains, calloc, memalign,
# posix_memalign, aligned_alloc, valloc) the four values read back with
# go tool pprof equal what the program did, exactly. The same on three
# hosts: glibc, a program linked with -ljemalloc, and libjemalloc.so.2
# preloaded after the agent. Also the endpoints' shape: default sample
# types, period, debug=1 text, seconds=N delta, gc=1, the index row.
. "$TOP/test/integration/lib.sh"

JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
SMALL=20000

wait_ready() {
    for i in $(seq 600); do
        grep -q '^ready' "$WORK/$1.out" && return 0
        kill -0 "$PID" 2>/dev/null || { cat "$WORK/$1.err" >&2; fail "$1 exited"; }
        sleep 0.1
    done
    fail "$1 did not get ready"
}

# check_sites NAME: compares every "expect" line of the program with the
# heap profile's per-leaf sums.
check_sites() {
    fetch debug/pprof/heap > "$WORK/$1.pb.gz"
    pprof -raw "$WORK/$1.pb.gz" | awk -f "$TOP/test/integration/heap_sites.awk" > "$WORK/$1.sites"
    n=0
    while read -r _ site io ib ao ab; do
        got=$(grep "^$site " "$WORK/$1.sites" || true)
        [ "$got" = "$site $io $ib $ao $ab" ] \
            || fail "$1: $site: profile says '${got:-nothing}', truth is '$site $io $ib $ao $ab' (inuse objects, bytes, alloc objects, bytes)"
        n=$((n + 1))
    done < <(grep '^expect ' "$WORK/$1.out")
    [ "$n" -ge 11 ] || fail "$1: only $n sites reported"
    note "$1: $n sites exact"
}

export PPROF_HEAP_RATE=1

# ---- glibc host, plus the endpoints' shape --------------------------------
start_agent glibc "$BUILD/test/programs/heap_truth" "$SMALL"
wait_ready glibc
check_sites glibc

raw=$(pprof -raw "$WORK/glibc.pb.gz")
expect_contains "$raw" "PeriodType: space bytes"
expect_contains "$raw" "Period: 1"
expect_contains "$raw" "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"
expect_contains "$raw" "bytes:[1000]" "numeric label bytes"
expect_not_contains "$raw" "Comment:" "the heap profile (the agent's counters are in /debug/stats)"
expect_contains "$(profile_note heap)" "lost=0" "the heap profile's note in /debug/stats"

top=$(pprof -top "http://$ADDR/debug/pprof/heap")
expect_contains "$top" "Type: inuse_space"
printf '%s\n' "$top" | grep -Eq '^ +96MB .* live_1000$' || { echo "$top"; fail "live_1000 is not 96MB in use"; }
top=$(pprof -top "http://$ADDR/debug/pprof/allocs")
expect_contains "$top" "Type: alloc_space"
printf '%s\n' "$top" | grep -Eq ' churn$' || { echo "$top"; fail "allocs lacks the freed churn"; }

# debug=1: Go's legacy text with raw counts, and pprof reads it back.
text=$(fetch 'debug/pprof/heap?debug=1')
expect_contains "$text" "@ heap/2"
expect_contains "$text" "100663: 100663000 [100663: 100663000] @ 0x"
expect_contains "$text" "live_1000+0x"
fetch 'debug/pprof/heap?debug=1' > "$WORK/heap.txt"
# pprof parses the legacy form itself (no names: the text has no mappings).
pprof -raw "$WORK/heap.txt" > "$WORK/text.raw"
grep -Eq '^ +512 +33554432 +512 +33554432:' "$WORK/text.raw" \
    || { head -20 "$WORK/text.raw"; fail "pprof reads the text form wrong"; }

# gc=1 is accepted; seconds=N gives a delta (nothing allocated meanwhile).
[ "$(http_status 'debug/pprof/heap?gc=1')" = 200 ] || fail "gc=1 is not accepted"
[ "$(http_status 'debug/pprof/heap?seconds=1&debug=1')" = 400 ] || fail "seconds with debug is not 400"
fetch 'debug/pprof/heap?seconds=1' > "$WORK/delta.pb.gz"
delta=$(pprof -raw "$WORK/delta.pb.gz")
expect_not_contains "$delta" "live_1000" "the delta profile"
headers=$(curl -s -D - -o /dev/null "http://$ADDR/debug/pprof/allocs")
expect_contains "$headers" 'Content-Disposition: attachment; filename="allocs"'

index=$(fetch debug/pprof/)
expect_contains "$index" "<a href='heap?debug=1'>heap</a>"
expect_contains "$index" "<a href='allocs?debug=1'>allocs</a>"
stop "$PID"

# ---- a program linked with jemalloc ----------------------------------------
cc -O1 -g -fno-omit-frame-pointer -fno-inline -pthread \
    "$TOP/test/programs/heap_truth.c" -o "$WORK/heap_truth_jemalloc" -ljemalloc
start_agent jemalloc_linked "$WORK/heap_truth_jemalloc" "$SMALL"
wait_ready jemalloc_linked
check_sites jemalloc_linked
stop "$PID"

# ---- jemalloc preloaded after the agent ------------------------------------
start_agent jemalloc_preloaded env LD_PRELOAD="$AGENT $JEMALLOC" \
    "$BUILD/test/programs/heap_truth" "$SMALL"
wait_ready jemalloc_preloaded
grep -q jemalloc "/proc/$PID/maps" || fail "jemalloc is not loaded"
check_sites jemalloc_preloaded
expect_not_contains "$(cat "$WORK/jemalloc_preloaded.err")" "loaded before the agent" "stderr with the agent first"
stop "$PID"

# ---- an allocator preloaded before the agent ---------------------------------
# Its malloc binds first: no allocation reaches the agent. The heap profile
# cannot be right, so it says why in its comment, on stderr (once) and in
# /debug/stats' notes, with the order that works.
TCMALLOC=$(ls /usr/lib/*/libtcmalloc_minimal.so.4 2>/dev/null | head -n 1)
for first in "$JEMALLOC" "$TCMALLOC"; do
    [ -n "$first" ] || fail "libtcmalloc-minimal4 is not installed (scripts/install-deps)"
    lib=$(basename "$first")
    start_agent first env LD_PRELOAD="$first $AGENT" "$BUILD/test/programs/heap_truth" "$SMALL"
    wait_ready first
    wait_until "the allocator's line on stderr" grep -q "loaded before the agent" "$WORK/first.err"
    line=$(grep "loaded before the agent" "$WORK/first.err")
    note "$line"
    expect_contains "$line" "malloc in this process is $lib's" "stderr"
    expect_contains "$line" "list libpprofagent.so first in LD_PRELOAD" "stderr"
    [ "$(grep -c "loaded before the agent" "$WORK/first.err")" = 1 ] || fail "said more than once"
    fetch debug/pprof/heap > "$WORK/first.pb.gz"
    expect_contains "$(pprof -comments "$WORK/first.pb.gz")" "malloc in this process is $lib's" "the heap profile's comments"
    expect_contains "$(profile_note heap)" "loaded before the agent" "/debug/stats' heap note"
    stop "$PID"
done
echo "ok"
