# The symbolizer gives back what naming an address cost. The first
# /debug/pprof/symbol request for a libc address, with libc's debug file
# installed, decompresses that file's DWARF (about 10 MB for Debian's libc
# debug file) and parses part of it. Once the request is answered:
# - the process's anonymous memory (its own /proc/PID/status RssAnon,
#   before the first request and after it) keeps less than a third of the
#   DWARF's decompressed size (read from the debug file);
# - the blocks the agent holds from the allocator (/debug/memory's
#   malloc_inuse + malloc_mmapped) are back within a tenth of it, after a
#   second request that loads it all again for a new address. (Freed heap
#   that glibc keeps for a worker thread's arena is not the agent's, but it
#   is bounded by one lookup's high-water mark per thread.)
# The cached answer is the same as the first.
. "$TOP/test/integration/lib.sh"

libc=$(ldd /bin/sleep | awk '$1 ~ /^libc\.so/ {print $3}')
id=$(readelf -n "$libc" | sed -n 's/.*Build ID: *//p')
debug="/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug"
[ -f "$debug" ] || fail "no debug file for $libc (libc6-dbg, scripts/install-deps)"
objcopy --decompress-debug-sections "$debug" "$WORK/libc.debug"
dwarf=$(size -A "$WORK/libc.debug" | awk '$1 ~ /^\.debug_/ {s += $2} END {print s + 0}')
note "libc's DWARF decompressed: $((dwarf / 1024)) kB"
[ "$dwarf" -gt 3000000 ] || fail "libc's DWARF is only $dwarf bytes: the test would see nothing"

start_agent sleeper sleep 120
base=$(awk '$6 ~ /\/libc\.so\.6$/ && $3 == "00000000" {split($1, a, "-"); print a[1]; exit}' "/proc/$PID/maps")
[ -n "$base" ] || fail "libc is not mapped in the sleeper"
addr_of() { # FUNC: runtime address inside libc's FUNC
    off=$(nm -D "$libc" | awk -v f="$1" 'index($3, f "@") == 1 {print $1; exit}')
    printf '0x%x' $((0x$base + 0x$off + 1))
}
anon() { awk '/^RssAnon:/ {print $2 * 1024}' "/proc/$PID/status"; }
held() { # bytes held from the allocator, from /debug/memory
    fetch debug/memory | python3 -c 'import json, sys
p = json.load(sys.stdin)["parts"]
print(p["malloc_inuse"] + p["malloc_mmapped"])'
}
ask() { curl -sS --max-time 60 -X POST --data "$1" "http://$ADDR/debug/pprof/symbol" | tail -n 1; }
# within WHAT MEASURE START BOUND: waits up to 5 s (the release follows the
# answer) for MEASURE to come within BOUND bytes of START.
within() {
    i=0
    while :; do
        k=$(($($2) - $3))
        [ "$k" -le "$4" ] && break
        i=$((i + 1))
        [ $i -lt 50 ] || fail "$1: $k bytes kept (bound $4)"
        sleep 0.1
    done
    note "$1: $((k / 1024)) kB kept (bound $(($4 / 1024)) kB)"
}

a1=$(addr_of qsort)
a2=$(addr_of getaddrinfo)
sleep 0.5
anon0=$(anon)
held0=$(held)
first=$(ask "$a1")
expect_contains "$first" "qsort" "the first answer"
within "anonymous memory after the first request" anon "$anon0" $((dwarf / 3))
again=$(ask "$a1")
[ "$again" = "$first" ] || fail "cached answer '$again' differs from '$first'"
second=$(ask "$a2")
expect_contains "$second" "getaddrinfo" "the second answer"
within "held from the allocator after the second" held "$held0" $((dwarf / 10))
stop "$PID"
echo ok
