# dlopen/dlclose in a loop during a CPU profile and heap sampling, with the
# plugin's allocations outliving it: the heap profile then holds stacks
# through code that is no longer mapped. Profiles parse, the loop keeps
# going, the host exits normally. (cpu_stress.sh covers the sampler at
# 1000 Hz against dlclose with code running in the plugin.)
. "$TOP/test/integration/lib.sh"

cat > "$WORK/plug.c" <<'SRC'
#include <stdlib.h>
#include <string.h>
void *plug_kept[1 << 16];
void plug_alloc(long round)
{
    char *p = malloc(4096);
    memset(p, (int)round, 4096);
    /* kept by the host process: the pointer goes to a static of the main
     * program's heap list through a leak on purpose */
    (void)p;
}
SRC
cc -O1 -g -fno-omit-frame-pointer -shared -fPIC -o "$WORK/libplug.so" "$WORK/plug.c"

export PPROF_HEAP_RATE=16384 PPROF_CPU_HZ=1000
# Until the profiles below are read (SIGUSR1), 120 s at most: a fixed 8 s
# ended before them on a loaded machine (the UBSan build beside the other
# sanitizer lane: the host had exited, normally, and the port refused).
start_agent dl "$BUILD/test/programs/hostile" dlheap "$WORK/libplug.so" 120
sleep 1
curl -s -o "$WORK/cpu.pb.gz" "http://$ADDR/debug/pprof/profile?seconds=3" &
CURL=$!
for i in 1 2 3; do
    fetch debug/pprof/heap > "$WORK/heap$i.pb.gz"
    fetch 'debug/pprof/symbol' -d '0x1+0x2' >/dev/null
    sleep 0.7
done
wait "$CURL"
pprof -top "$WORK/cpu.pb.gz" > "$WORK/cpu.top"
samples=$(sed -n 's/.* of \([0-9.]*\)m\{0,1\}s total.*/\1/p' "$WORK/cpu.top" | head -n 1)
head -n 12 "$WORK/cpu.top"
[ -n "$samples" ] || fail "CPU profile without samples"
top=$(pprof -top -sample_index=alloc_space "$WORK/heap3.pb.gz")
echo "$top" | head -n 12
expect_contains "$top" "run_dlheap" "heap profile across dlclose"
kill -USR1 "$PID"
if wait "$PID"; then status=0; else status=$?; fi
[ "$status" = 0 ] || fail "host exited with $status"
grep -qx 'dl rounds>100: 1' "$WORK/dl.out" || fail "the dlopen loop stalled: $(cat "$WORK/dl.out")"
echo ok
