# Heap, allocs and mutex after pprof-attach (docs/attach.md): the doors'
# relocations are pointed at the agent, so what attach_target
# (attach_work.h) allocates after the attach is in the heap and allocs
# profiles exactly as the program counted it (PPROF_HEAP_RATE=1: every
# allocation recorded, as heap_truth.sh), blocks allocated before the
# attach are freed and reallocated through the agent without harm, and
# the mutex profile puts on holder_work, and the block profile on
# wait_for_holder, the wait the program measured (within 20%, as
# contention_truth.sh). The profiles say "since attach
# at". After the detach the program allocates and frees (blocks of the
# attached time included) with nothing recorded: a second attach finds
# the first round's allocations and none of the second's, and no block
# in use. The program's own account stays clean and it exits 0.
. "$TOP/test/integration/lib.sh"

attach_target_start

# attach_to: attaches to PID recording every allocation and lock wait;
# sets ADDR.
attach_to() {
    PPROF_HEAP_RATE=1 PPROF_MUTEX_FRACTION=1 PPROF_ADDR=127.0.0.1:0 \
        "$ATTACH" "$PID" 2>"$WORK/attach.err" ||
        { cat "$WORK/attach.err" >&2; fail "pprof-attach $PID failed"; }
    ADDR=$(sed -n 's|^pprofagent: serving http://\([^/]*\)/debug/pprof/ (pid [0-9]*)$|\1|p' "$WORK/attach.err")
    [ -n "$ADDR" ] || fail "pprof-attach printed no serving line"
}

# work SIGNAL WHAT: sends SIGNAL to the target and waits for its line
# starting with WHAT.
work() {
    kill "-$1" "$PID"
    wait_until "the target's '$2' line" grep -q "^$2" "$WORK/target.out"
}

# heap_site PROFILE: "INUSE_OBJECTS INUSE_BYTES ALLOC_OBJECTS ALLOC_BYTES"
# of the leaves one_block and alloc_after_attach together.
heap_site() {
    fetch "debug/pprof/$1" >"$WORK/$1.pb.gz"
    pprof -raw "$WORK/$1.pb.gz" | awk -f "$TOP/test/integration/heap_sites.awk" |
        awk '$1 == "one_block" || $1 == "alloc_after_attach" {
                 io += $2; ib += $3; ao += $4; ab += $5 }
             END { printf "%d %d %d %d\n", io, ib, ao, ab }'
}

# The program's own mappings and their protections: the rewrite of its
# read-only GOT (RELRO) must leave them as the loader made them.
own_maps() {
    grep "$BUILD/test/programs/attach_target\$" "/proc/$PID/maps" | awk '{ print $1, $2 }'
}
maps_before=$(own_maps)
# maps_kept WHEN: fails unless every mapping of before is there with the
# same protection (the agent's symbolizer may map the file anew).
maps_kept() {
    own_maps >"$WORK/maps.now"
    lost=$(printf '%s\n' "$maps_before" | grep -vxF -f "$WORK/maps.now" || true)
    [ -z "$lost" ] || fail "the program's mappings changed with the $1: '$lost' is gone ($(cat "$WORK/maps.now"))"
}

attach_to
note "$(grep 'relocations' "$WORK/target.err")"
maps_kept attach

# --- round 1, attached: heap and allocs as the program counted ---
work USR1 "mutex round=1"
truth1=$(sed -n 's/^heap round=1 alloc_after_attach //p' "$WORK/target.out")
[ -n "$truth1" ] || fail "the target printed no heap line"
for kind in heap allocs; do
    got=$(heap_site "$kind")
    [ "$got" = "$truth1" ] ||
        fail "$kind after the attach: '$got', the program counted '$truth1' (inuse objects, bytes, alloc objects, bytes)"
    note "$kind after the attach: $got, as the program counted"
    expect_contains "$(pprof -raw "$WORK/$kind.pb.gz")" "since attach at" "the $kind profile's comment"
done

# --- the mutex profile: the wait the program measured, on holder_work ---
measured_ms=$(sed -n 's/^mutex round=1 wait_ns=//p' "$WORK/target.out" | awk '{ printf "%.2f", $1 / 1e6 }')
mutex=$(pprof -top -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/mutex")
echo "$mutex" | head -n 8
within 20 "$(flat_ms "$mutex" holder_work)" "$measured_ms" "mutex delay on holder_work after the attach"
expect_contains "$mutex" "since attach at" "the mutex profile's comment"
block=$(pprof -top -sample_index=delay -unit=ms "http://$ADDR/debug/pprof/block")
echo "$block" | head -n 8
within 20 "$(flat_ms "$block" wait_for_holder)" "$measured_ms" "block delay on wait_for_holder after the attach"

# --- detached: allocations and frees go to the C library alone ---
"$ATTACH" --detach "$PID" 2>"$WORK/detach.err" ||
    { cat "$WORK/detach.err" >&2; fail "pprof-attach --detach failed"; }
note "$(grep 'relocations put back' "$WORK/target.err")"
expect_contains "$(cat "$WORK/target.err")" "relocations put back" "the detach's line"
maps_kept detach
work USR1 "mutex round=2"
work USR2 "freed round=2"
note "$(grep '^freed' "$WORK/target.out")"

# --- attached again: round 1 recorded, round 2 not, nothing in use ---
attach_to
ao1=$(echo "$truth1" | awk '{ print $3, $4 }')
got=$(heap_site allocs)
[ "$got" = "0 0 $ao1" ] ||
    fail "allocs after a detach and an attach: '$got', want '0 0 $ao1' (round 1 only, freed)"
note "after detach, round 2 and the frees, attached again: $got"
"$ATTACH" --detach "$PID" 2>/dev/null || fail "the second detach failed"

# --- the program's own account ---
touch "$STOPFILE"
wait_exit "$PID" 60
tail -n 3 "$WORK/target.out"
expect_contains "$(cat "$WORK/target.out")" "rounds_ok eintr=0 short=0 bad=0" "the target's account"
[ "$STATUS" = 0 ] || fail "the target exited with $STATUS"
