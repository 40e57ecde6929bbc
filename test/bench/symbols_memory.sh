#!/bin/sh
# The symbolizer's memory and time for the first name in libc, with libc's
# debug file installed (libc6-dbg): a sleeping program under the agent is
# asked /debug/pprof/symbol for a libc function, then for the same one
# (cached), then for another (loaded again: the first request's tables
# were given back), then left idle. For each step, the process's RSS and
# anonymous RSS over where it started (from its own /proc/PID/status) and
# the CPU time the process spent on the request (its threads' schedstat),
# medians over SYMBOLS_MEMORY_ROUNDS rounds (5), with min-max.
#
#   sh test/bench/symbols_memory.sh BUILD_DIR
set -eu
. "$(dirname "$0")/agent_port.sh"
build=$(cd "${1:-build}" && pwd)
agent="$build/libpprofagent.so"
rounds=${SYMBOLS_MEMORY_ROUNDS:-5}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/symmem.XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
libc=$(ldd /bin/sleep | awk '$1 ~ /^libc\.so/ {print $3}')
id=$(readelf -n "$libc" | sed -n 's/.*Build ID: *//p')
[ -f "/usr/lib/debug/.build-id/$(echo "$id" | cut -c1-2)/$(echo "$id" | cut -c3-).debug" ] ||
    echo "note: no debug file for $libc (libc6-dbg): the figures are for its exported names only"

status() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$pid/status"; }
cpu_ns() { cat /proc/"$pid"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }
addr_of() {
    off=$(nm -D "$libc" | awk -v f="$1" 'index($3, f "@") == 1 {print $1; exit}')
    printf '0x%x' $((0x$base + 0x$off + 1))
}
# step NAME [ADDR]: asks for ADDR (none: idle 2 s) and records RSS deltas
# (kB) and the CPU time of the request (ms).
step() {
    c0=$(cpu_ns)
    if [ -n "${2:-}" ]; then
        curl -s -o /dev/null -X POST --data "$2" "http://$addr/debug/pprof/symbol"
        sleep 0.3
    else
        sleep 2
    fi
    c1=$(cpu_ns)
    echo "$1 $(($(status VmRSS) - rss0)) $(($(status RssAnon) - anon0)) $(((c1 - c0) / 1000)) $r" >> "$tmp/results"
}

for r in $(seq "$rounds"); do
    rm -f "$tmp/port"
    env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$tmp/port" PPROF_LOG=quiet \
        sleep 60 >/dev/null 2>&1 &
    pid=$!
    wait_port "$tmp/port" 400 "the agent"
    addr=$(cat "$tmp/port")
    base=$(awk '$6 ~ /\/libc\.so\.6$/ && $3 == "00000000" {split($1, a, "-"); print a[1]; exit}' "/proc/$pid/maps")
    sleep 0.5
    rss0=$(status VmRSS); anon0=$(status RssAnon)
    step first "$(addr_of qsort)"
    step cached "$(addr_of qsort)"
    step new_address "$(addr_of getaddrinfo)"
    step idle
    kill "$pid"; wait "$pid" 2>/dev/null || true
    pid=""
done

stat() { # NAME FIELD: "median (min-max)"
    awk -v n="$1" -v f="$2" '$1 == n { print $f }' "$tmp/results" | sort -n |
        awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                                 printf "%s (%s-%s)", m, v[1], v[NR] }'
}
echo "symbolizer, first libc name ($rounds rounds; medians (min-max)); RSS over the process's own start:"
printf '%-12s %-22s %-22s %-22s\n' step rss_kB anon_kB cpu_us
for s in first cached new_address idle; do
    printf '%-12s %-22s %-22s %-22s\n' "$s" "$(stat $s 2)" "$(stat $s 3)" "$(stat $s 4)"
done
