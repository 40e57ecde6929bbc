# The peak: a program rises to 200 MiB from one function, frees it all at
# once and idles; /debug/pprof/peak names that function with what the
# program counted at its top, within 10%, while the heap profile, taken
# after the fall, no longer shows it. reset=1 starts a new period.
# (200 MiB rather than the issue's 500: the same path, less memory and
# time on a shared machine; docs/memory.md has a 500 MiB run.)
. "$TOP/test/integration/lib.sh"

MB=200

# flat FUNC FILE: FUNC's flat bytes in a profile.
flat() {
    pprof -top -unit=B "$2" | awk -v f="$1" '$NF == f { v = $1; sub(/B$/, "", v) } END { print v + 0 }'
}

start_agent peak "$BUILD/test/programs/peak_rise" "$MB"
for i in $(seq 100); do grep -q '^ready' "$WORK/peak.out" && break; sleep 0.1; done

# Before the rise the peak holds only the background blocks.
fetch debug/pprof/peak > "$WORK/before.pb.gz"
[ "$(flat rise_to_peak "$WORK/before.pb.gz")" = 0 ] || fail "the peak shows rise_to_peak before the rise"

kill -USR1 "$PID"
for i in $(seq 300); do
    grep -q '^freed' "$WORK/peak.out" && break
    sleep 0.1
done
grep -q '^freed' "$WORK/peak.out" || fail "peak_rise did not rise and fall"
truth=$(awk '$1 == "peak" { print $2 }' "$WORK/peak.out")

fetch debug/pprof/peak > "$WORK/peak.pb.gz"
got=$(flat rise_to_peak "$WORK/peak.pb.gz")
comment=$(profile_note peak)
note "peak: rise_to_peak $got B, the program counted $truth B at its top"
note "${comment#*peak: }"
awk -v g="$got" -v t="$truth" 'BEGIN { exit !(g >= 0.9 * t && g <= 1.1 * t) }' \
    || { pprof -top "$WORK/peak.pb.gz" >&2; fail "peak shows $got B of rise_to_peak; the program had $truth B"; }
top=$(pprof -top "$WORK/peak.pb.gz")
expect_contains "$top" "Type: inuse_space"

# The heap profile now: the blocks are gone.
fetch debug/pprof/heap > "$WORK/heap.pb.gz"
[ "$(flat rise_to_peak "$WORK/heap.pb.gz")" = 0 ] || fail "the heap still shows rise_to_peak after the free"

# debug=1 text, the index row, seconds refused.
text=$(fetch 'debug/pprof/peak?debug=1')
expect_contains "$text" "rise_to_peak"
expect_contains "$text" "# peak: inuse="
expect_contains "$(fetch debug/pprof/)" "peak?debug=1"
[ "$(http_status 'debug/pprof/peak?seconds=1')" = 400 ] || fail "peak?seconds=1 is not 400"

# reset=1 answers this period's peak and starts a new one from what is in
# use now (the background blocks only).
fetch 'debug/pprof/peak?reset=1' > "$WORK/reset.pb.gz"
[ "$(flat rise_to_peak "$WORK/reset.pb.gz")" -gt 0 ] || fail "reset=1 did not answer the period's peak"
sleep 0.5
fetch debug/pprof/peak > "$WORK/after.pb.gz"
[ "$(flat rise_to_peak "$WORK/after.pb.gz")" = 0 ] || fail "after reset=1 the peak still shows rise_to_peak"
stop "$PID"
