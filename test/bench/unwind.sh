#!/bin/sh
# Stack walk cost: the table-driven walker against libunwind's cached
# unw_backtrace, from the same call sites in -O2 code without frame
# pointers (test_cfi_walk's bench mode), at two depths. Instructions per
# walk with callgrind (deterministic), and the median time per walk of 11
# batches of 1000 (thread CPU time, so preemption does not read as cost).
#
#   sh test/bench/unwind.sh BUILD_DIR
set -eu
build=$(cd "${1:-build}" && pwd)
bin="$build/test/unit/test_cfi_walk"
work=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
[ -x "$bin" ] || make -s "$bin" >/dev/null

printf '| %-10s | %6s | %12s | %12s |\n' unwinder frames "instructions" "median ns"
printf '|%s|%s|%s|%s|\n' "------------" "--------" "--------------" "--------------"
for depth in 0 12 16; do
    for who in walker libunwind; do
        line=$("$bin" bench "$depth" "$who")
        frames=$(printf '%s\n' "$line" | sed -n 's/.*frames=\([0-9]*\).*/\1/p')
        ns=$(printf '%s\n' "$line" | sed -n 's/.*median_ns=\([0-9]*\).*/\1/p')
        ir=-
        if command -v valgrind >/dev/null 2>&1; then
            valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
                "$bin" bench "$depth" "$who" >/dev/null 2>&1 || true
            fn=bench_${who}_walks
            total=$(callgrind_annotate --inclusive=yes "$work/cg.out" 2>/dev/null \
                | sed -n "s/^ *\([0-9,]*\) .*:$fn .*/\1/p" | head -n 1 | tr -d ,)
            walks=$(printf '%s\n' "$line" | sed -n 's/.*walks=\([0-9]*\).*/\1/p')
            [ -n "$total" ] && ir=$((total / walks))
        fi
        printf '| %-10s | %6s | %12s | %12s |\n' "$who" "$frames" "$ir" "$ns"
    done
done
