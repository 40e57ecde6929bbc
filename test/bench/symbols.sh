#!/bin/sh
# Cost of naming stripped binaries. Copies of test/programs/stripped_target
# stripped five ways run under the agent:
#   full      not stripped (the reference)
#   buildid   stripped, debug file in a build-ID tree (PPROF_DEBUG_DIR)
#   debuglink stripped, debug file found by .gnu_debuglink (CRC read)
#   mini      stripped, MiniDebugInfo (.gnu_debugdata, xz)
#   none      stripped, nothing to find
# For each, interleaved over rounds, the wall time of the first
# /debug/pprof/symbol request for stripped_burn (maps read, debug search,
# symbol table and DWARF opened: the one-time cost) and of the second
# (cached), medians in ms. (No callgrind count: under valgrind the agent's
# server did not answer reliably enough to measure; see README.)
#
#   sh test/bench/symbols.sh BUILD_DIR     (SYMBOLS_BENCH_ROUNDS=7)
set -eu
. "$(dirname "$0")/stats.sh"
. "$(dirname "$0")/agent_port.sh"
build=$(cd "${1:-build}" && pwd)
agent="$build/libpprofagent.so"
orig="$build/test/programs/stripped_target"
rounds=${SYMBOLS_BENCH_ROUNDS:-7}
work=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
work=$(cd "$work" && pwd -P)
pids=""
trap 'for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

[ -x "$orig" ] || make -s "$orig" >/dev/null
id=$(readelf -n "$orig" | sed -n 's/.*Build ID: *//p')
off=$(nm "$orig" | awk '$3 == "stripped_burn" {print $1}')

objcopy --only-keep-debug "$orig" "$work/stripped_target.debug"
mkdir -p "$work/full" "$work/buildid" "$work/debuglink" "$work/mini" "$work/none" \
    "$work/dd/.build-id/$(echo "$id" | cut -c1-2)"
cp "$orig" "$work/full/stripped_target"
objcopy --strip-all "$orig" "$work/buildid/stripped_target"
cp "$work/stripped_target.debug" \
    "$work/dd/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug"
(cd "$work" && objcopy --strip-all --add-gnu-debuglink=stripped_target.debug \
    "$orig" debuglink/stripped_target)
mkdir -p "$work/debuglink/.debug"
cp "$work/stripped_target.debug" "$work/debuglink/.debug/"
nm -D "$orig" --format=posix --defined-only | awk '{print $1}' | sort > "$work/dyn"
nm "$orig" --format=posix --defined-only | awk '$2 == "T" || $2 == "t" {print $1}' |
    sort > "$work/funcs"
comm -13 "$work/dyn" "$work/funcs" > "$work/keep"
objcopy -S --keep-symbols="$work/keep" "$work/stripped_target.debug" "$work/mini_debuginfo"
xz -f "$work/mini_debuginfo"
objcopy --strip-all --add-section .gnu_debugdata="$work/mini_debuginfo.xz" \
    "$orig" "$work/mini/stripped_target"
objcopy --strip-all "$orig" "$work/none/stripped_target"
variants="full buildid debuglink mini none"

# start VARIANT: runs the variant under the agent; sets pid,
# addr and sym (the runtime address of stripped_burn).
start() {
    v=$1
    rm -f "$work/port"
    dd=""
    [ "$v" = buildid ] && dd="$work/dd"
    env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$work/port" \
        PPROF_DEBUG_DIR="$dd" PPROF_LOG=quiet "$work/$v/stripped_target" 30 \
        >/dev/null 2>&1 &
    pid=$!
    pids="$pids $pid"
    wait_port "$work/port" 1200 "$v"
    addr=$(cat "$work/port")
    base=$(awk -v p="$work/$v/stripped_target" '$6 == p && $3 == "00000000" {split($1, a, "-"); print a[1]; exit}' "/proc/$pid/maps")
    sym=$(printf '0x%x' $((0x$base + 0x$off)))
}

ask() { # prints the request's wall time in ms; checks the answer
    t=$(curl -s -o "$work/answer" -w '%{time_total}' -X POST --data "$sym" \
        "http://$addr/debug/pprof/symbol") || return 1
    awk -v t="$t" 'BEGIN {printf "%.3f\n", t * 1000}'
}

for r in $(seq "$rounds"); do
    for v in $variants; do
        start "$v"
        first=$(ask)
        named=$(grep -c stripped_burn "$work/answer" || true)
        second=$(ask)
        echo "$v $first $second $named" >> "$work/times"
        kill "$pid"; wait "$pid" 2>/dev/null || true
    done
done

ref=$(awk '$1 == "full" {print $2}' "$work/times" | median)
echo "first and second /debug/pprof/symbol request for one static function ($rounds rounds, medians):"
printf '%-10s %10s %10s %8s %6s\n' variant first_ms second_ms vs_full named
for v in $variants; do
    f=$(awk -v v=$v '$1 == v {print $2}' "$work/times" | median)
    s=$(awk -v v=$v '$1 == v {print $3}' "$work/times" | median)
    n=$(awk -v v=$v '$1 == v && $4 > 0 {n++} END {print n + 0}' "$work/times")
    awk -v v=$v -v f="$f" -v s="$s" -v r="$ref" -v n="$n" -v R="$rounds" \
        'BEGIN {printf "%-10s %10.2f %10.2f %8.2f %3d/%d\n", v, f, s, f / r, n, R}'
done
