# A short libFuzzer run (ASan+UBSan) of every parser facing the network:
# query parameters and form bodies, symbolz input, the Authorization
# header, request paths. `make fuzz` runs the same targets for longer.
. "$TOP/test/integration/lib.sh"

n=0
for t in "$TOP"/test/fuzz/fuzz_*.c; do
    [ -x "$BUILD/fuzz/$(basename "$t" .c)" ] || fail "fuzz target $(basename "$t" .c) not built (is clang installed?)"
    n=$((n + 1))
done
[ "$n" -ge 4 ] || fail "only $n fuzz targets"
out=$(sh "$TOP/test/fuzz/run" "$BUILD" "${FUZZ_TEST_SECONDS:-6}") || { echo "$out"; fail "a fuzz target failed"; }
echo "$out"
total=0
for runs in $(echo "$out" | sed -n 's/.*: \([0-9]*\) inputs.*/\1/p'); do
    [ "$runs" -gt 1000 ] || fail "a target ran only $runs inputs"
    total=$((total + runs))
done
note "$total inputs in total"
echo ok
