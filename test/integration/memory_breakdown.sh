# /debug/memory on a program whose RSS is mostly glibc arena free space:
# producer threads allocate, consumer threads free 9 blocks in 10 of them
# (in the producers' arenas). The breakdown's rss is the program's own
# VmRSS, its parts sum to it within 5%, and the allocator's free bytes are
# those the program read from mallinfo2 itself, the same share of RSS.
. "$TOP/test/integration/lib.sh"

start_agent arena "$BUILD/test/programs/arena_growth" 8 40 10
for i in $(seq 600); do grep -q '^ready' "$WORK/arena.out" && break; sleep 0.1; done
grep -q '^ready' "$WORK/arena.out" || fail "arena_growth did not get ready"

fetch debug/memory > "$WORK/memory.json"
kill -USR1 "$PID"
for i in $(seq 50); do [ "$(grep -c '^rss' "$WORK/arena.out")" -ge 2 ] && break; sleep 0.1; done
set -- $(grep '^mallinfo' "$WORK/arena.out" | tail -1)
fordblks=$4 uordblks=$3
rss=$(grep '^rss' "$WORK/arena.out" | tail -1 | cut -d' ' -f2)
note "the program: VmRSS $rss, mallinfo2 uordblks $uordblks fordblks $fordblks"

python3 - "$WORK/memory.json" "$rss" "$uordblks" "$fordblks" <<'PY' || fail "/debug/memory disagrees with the program"
import json, sys
m = json.load(open(sys.argv[1]))
rss, inuse, free = (int(x) for x in sys.argv[2:5])
p = m["parts"]
total = sum(p.values())
a = m["allocator"]
h = m["sampled_heap"]
print("# rss %d, parts %s (sum %d)" % (m["rss"], p, total))
print("# allocator free_bytes %d, sampled heap %d +- %d"
      % (a["free_bytes"], h["inuse_bytes"], h["stddev_bytes"]))
bad = []
if abs(m["rss"] - rss) > 0.05 * rss:
    bad.append("rss %d is not the program's VmRSS %d" % (m["rss"], rss))
if abs(total - m["rss"]) > 0.05 * m["rss"] or total != m["parts_sum"]:
    bad.append("parts sum to %d, rss is %d" % (total, m["rss"]))
if min(p.values()) < 0:
    bad.append("a negative part")
if a["name"] != "glibc" or abs(a["free_bytes"] - free) > 0.1 * free:
    bad.append("allocator free_bytes %d, the program's fordblks %d" % (a["free_bytes"], free))
# The free bytes are resident (fragmented among live blocks) and explain
# most of RSS: the part says so, close to what mallinfo2 says.
if not (0.8 * free <= p["malloc_free"] <= 1.1 * free):
    bad.append("malloc_free %d, the program's fordblks %d" % (p["malloc_free"], free))
# How much of RSS is free space depends on how glibc placed the arenas in
# this run (36-60% seen); the share the part claims must be the share the
# program's own mallinfo2 gives, and the run must have fragmented at all.
if free < 0.25 * rss:
    bad.append("the program fragmented too little to test (fordblks %d of VmRSS %d)" % (free, rss))
if abs(p["malloc_free"] / m["rss"] - free / rss) > 0.08:
    bad.append("malloc_free is %.0f%% of rss, the program's fordblks %.0f%% of its VmRSS"
               % (100.0 * p["malloc_free"] / m["rss"], 100.0 * free / rss))
if abs(p["malloc_inuse"] - inuse) > 0.1 * inuse:
    bad.append("malloc_inuse %d, the program's uordblks %d" % (p["malloc_inuse"], inuse))
if m["smaps"]["stack_count"] < 17 or p["thread_stacks"] <= 0:
    bad.append("%d stacks found for 17 threads" % m["smaps"]["stack_count"])
if m["smaps"]["arena_heap_count"] < 2:
    bad.append("no arena heaps found")
if p["agent"] <= 0:
    bad.append("the agent's own memory is 0")
# The heap profile's estimate of the live blocks, within its error bar.
if abs(h["inuse_bytes"] - inuse) > 4 * h["stddev_bytes"] + 0.1 * inuse:
    bad.append("sampled heap %d +- %d, uordblks %d" % (h["inuse_bytes"], h["stddev_bytes"], inuse))
for b in bad:
    print("FAIL: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY

headers=$(curl -s -D - -o /dev/null "http://$ADDR/debug/memory")
expect_contains "$headers" "application/json"
expect_contains "$(fetch debug/pprof/)" "../memory"
charts=$(fetch debug/charts)
expect_contains "$charts" "id=\"memory\"" "the charts page"
stop "$PID"
