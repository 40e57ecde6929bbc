# What a user sees of Debian's redis-server (stripped, no debug files;
# /usr/bin/redis-server is a link to redis-check-rdb) under redis-benchmark:
# - the CPU profile says File: redis-server (the name it was started by)
#   and its main mapping is /usr/bin/redis-server, a path that opens the
#   same binary;
# - no location in the binary is left without a name: code without a
#   symbol is named redis-server+0xSTART after the function the unwind
#   tables say it belongs to, the start of a function (the unwind tables
#   list them), one name for every address of it; the same in the flame
#   graph and in goroutine?debug=1;
# - the profile carries no comment (Go's carry none): the agent's counters
#   are in /debug/stats;
# - the index lists /usr/bin/redis-check-rdb as exported functions only,
#   with redis-tools-dbgsym (the package owning it), and none of the
#   agent's own libraries (libdw, libelf, libbz2, libz).
. "$TOP/test/integration/lib.sh"
for p in redis-server redis-benchmark redis-cli; do
    command -v "$p" >/dev/null 2>&1 || fail "$p is not installed (scripts/install-deps)"
done
[ -L /usr/bin/redis-server ] || fail "/usr/bin/redis-server is not a link"
real=$(readlink -f /usr/bin/redis-server)
note "/usr/bin/redis-server -> $real"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_agent redis /usr/bin/redis-server --port "$port" --bind 127.0.0.1 --save '' \
    --appendonly no --dir "$WORK"
for i in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
timeout 60 redis-benchmark -p "$port" -q -n 100000000 -t set,get,lpush,incr -P 16 > /dev/null 2>&1 &
B=$!
PIDS="$PIDS $B"
sleep 0.5
fetch 'debug/pprof/profile?seconds=3' > "$WORK/cpu.pb.gz"
fetch 'debug/pprof/flamegraph?profile=profile&seconds=2' > "$WORK/flame.svg"
kill "$B" 2>/dev/null || true
wait "$B" 2>/dev/null || true
fetch 'debug/pprof/goroutine?debug=1' > "$WORK/threads.txt"

top=$(pprof -top -nodecount=400 "$WORK/cpu.pb.gz")
printf '%s\n' "$top" | head -n 12
expect_contains "$top" "File: redis-server
" "pprof's header"
raw=$(pprof -raw "$WORK/cpu.pb.gz")
main=$(printf '%s\n' "$raw" | sed -n '/^Mappings/,$p' | grep '^1: ')
expect_contains "$main" " /usr/bin/redis-server " "the main mapping"
# No diagnostics in the profile: the one comment allowed says which threads
# it could not see (redis's jemalloc background threads block every signal).
[ "$(printf '%s\n' "$raw" | sed -n 's/^Comment: //p' | grep -v 'threads block signal [0-9]*: not profiled$')" = "" ] ||
    fail "the profile carries a comment: $(printf '%s\n' "$raw" | grep '^Comment')"
expect_not_contains "$(pprof -comments "$WORK/cpu.pb.gz" | grep -v "threads block signal [0-9]*: not profiled$")" pprofagent "pprof -comments"
cpu_note=$(profile_note cpu)
note "the agent's note: $cpu_note"
expect_contains "$cpu_note" " samples at " "/debug/stats's profile_notes.cpu"

locs=$(printf '%s\n' "$raw" | sed -n '/^Locations/,/^Mappings/p')
bare=$(printf '%s\n' "$locs" | grep -c ' M=1 *$' || true)
named=$(printf '%s\n' "$locs" | grep -o 'redis-server+0x[0-9a-f]*' | sort -u)
nnamed=$(printf '%s\n' "$named" | grep -c . || true)
nlocs=$(printf '%s\n' "$locs" | grep -c 'redis-server+0x' || true)
note "binary locations without a name: $bare; $nlocs named after $nnamed functions' starts"
[ "$bare" -eq 0 ] || fail "$bare locations in the binary have no name"
[ "$nnamed" -ge 1 ] || fail "no code of the binary was named after its function's start"
# Each name's start is where the unwind tables (readelf's .eh_frame
# listing) start a description, and every named location lies in it.
readelf --debug-dump=frames "$real" 2>/dev/null |
    sed -n 's/.* FDE cie=[0-9a-f]* pc=0*\([0-9a-f]*\)\.\.0*\([0-9a-f]*\)$/\1 \2/p' > "$WORK/fdes"
[ -s "$WORK/fdes" ] || fail "readelf lists no frame description of $real"
for n in $named; do
    start=${n#redis-server+0x}
    grep -q "^$start " "$WORK/fdes" || fail "$n: no frame description starts at 0x$start"
done
printf '%s\n' "$raw" > "$WORK/raw"
python3 - "$WORK/raw" "$WORK/fdes" <<'PY' || fail "a named location is not inside the function its name gives"
import re, sys
raw = open(sys.argv[1]).read()
fdes = {int(a, 16): int(b, 16) for a, b in (l.split() for l in open(sys.argv[2]))}
m = re.search(r"^1: 0x([0-9a-f]+)/0x[0-9a-f]+/0x([0-9a-f]+) ", raw, re.M)
lo, off = int(m.group(1), 16), int(m.group(2), 16)
n = 0
for a, s in re.findall(r"^ *\d+: 0x([0-9a-f]+) M=1 redis-server\+0x([0-9a-f]+) ", raw, re.M):
    fa, start = int(a, 16) - lo + off, int(s, 16)
    if not (start in fdes and start <= fa < fdes[start]):
        sys.exit("0x%x (named %s) is not inside 0x%x..0x%x" % (fa, s, start, fdes.get(start, 0)))
    n += 1
print("# named locations inside their functions' frame descriptions: %d" % n)
PY

svg_names=$(grep -o 'redis-server+0x[0-9a-f]*' "$WORK/flame.svg" | sort -u | tr '\n' ' ')
note "flame graph: $svg_names"
expect_not_contains "$(cat "$WORK/flame.svg")" "[redis-check-rdb]" "the flame graph"
expect_contains "$(cat "$WORK/threads.txt")" "redis-server+0x" "goroutine?debug=1"

index=$(fetch debug/pprof/)
unnamed=$(printf '%s\n' "$index" | sed -n '/without a symbol/,/<\/ul>/p')
printf '%s\n' "$unnamed" | grep '<li>' | head -n 20
expect_contains "$unnamed" "<li>$real (build ID" "the index's list"
expect_contains "$(printf '%s\n' "$unnamed" | grep "<li>$real ")" \
    "exported functions only; names: <code>apt install redis-tools-dbgsym</code>" "the binary's line"
for lib in libdw libelf libbz2 libz.so; do
    expect_not_contains "$unnamed" "/$lib" "the index's list (the agent's own $lib)"
done
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
