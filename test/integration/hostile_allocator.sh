# A contended lock can be one inside the host's allocator: jemalloc's
# mutexes go through pthread_mutex_lock, so the agent samples them with an
# allocator lock held, and captures a stack there. That capture must not
# allocate or free. libunwind's fast walk uses thread-local storage that
# the C library allocates on a thread's first use, and may free (a
# dlclose'd object's block) on the first use after a dlclose; either then
# waits on the lock the thread holds. Old builds hung in the first round.
#
# Runs, each on jemalloc with one arena and no thread cache (every 16-byte
# block takes the same lock, the size of the C library's own blocks here):
#  - heap sampling off: no capture outside locks ever readies a thread;
#  - heap sampling on: both kinds of capture mix;
#  - a plugin with thread-local storage, touched by every thread and
#    dlclose'd while they churn: the captures that follow walk frame by
#    frame (glibc 2.36 would free nothing there; later C libraries may).
# Each run must finish, and the block and mutex profiles give the waits to
# the host's thread function (churner: its allocations, and in the plugin
# run also the plugin's first thread-local access, whose block the C
# library allocates through jemalloc under the same lock).
. "$TOP/test/integration/lib.sh"

JEMALLOC=$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -n 1)
[ -n "$JEMALLOC" ] || fail "libjemalloc2 is not installed"
H="$BUILD/test/programs/hostile"
export MALLOC_CONF=narenas:1,tcache:false

cat > "$WORK/tls.c" <<'SRC'
__thread char plug_tls[16];
void plug_touch(void) { plug_tls[0]++; }
SRC
cc -O1 -g -shared -fPIC -o "$WORK/libtls.so" "$WORK/tls.c"

# run NAME HEAP_RATE [PLUGIN]
run() {
    name=$1
    export PPROF_HEAP_RATE=$2
    shift 2
    start_agent "$name" env LD_PRELOAD="$AGENT:$JEMALLOC" "$H" allocator 5 "$@"
    i=0
    until grep -q '^allocator ok' "$WORK/$name.out"; do
        i=$((i + 1))
        if [ $i -gt 300 ]; then
            stacks "$PID"
            fail "$name: the host did not finish within 30 s"
        fi
        kill -0 "$PID" 2>/dev/null || { cat "$WORK/$name.err" >&2; fail "$name: the host died"; }
        sleep 0.1
    done
    note "$name: 5 rounds of 8 threads done in $((i / 10)).$((i % 10)) s"
    for kind in block mutex; do
        top=$(pprof -top -cum "http://$ADDR/debug/pprof/$kind")
        # The waits are the churning threads' (their thread function, as a
        # plugin's first thread-local access is a real wait outside
        # alloc_churn); the main thread's pthread_join of them is a wait in
        # block too (as a WaitGroup's in Go), charged to main's stack, and is
        # left out of the share.
        share=$(printf '%s\n' "$top" | awk '
            { p = $5; sub(/%/, "", p); p += 0 }
            $NF == "churner" { c = p }
            $NF == "main" { j = p }
            END { if (j < 100) printf "%.2f", c * 100 / (100 - j) }')
        total=$(printf '%s\n' "$top" | sed -n 's/.* of \(.*\) total.*/\1/p')
        note "$name: $kind profile $total, churner ${share:-0}% cum"
        awk -v s="${share:-0}" 'BEGIN { exit !(s >= 95) }' \
            || { printf '%s\n' "$top" >&2; fail "$name $kind: churner has ${share:-0}% of the waits"; }
    done
    stop "$PID"
}

run no_heap_sampling 0
run heap_sampling 524288
run dlclose 0 "$WORK/libtls.so"
echo ok
