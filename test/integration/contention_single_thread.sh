# A program with one thread: while glibc's __libc_single_threaded holds
# (with PPROF_ADDR=off the agent creates no thread), nothing can contend
# for a private mutex, and the lock hook must forward at once instead of
# paying the real try-lock's locked compare-exchange. Callgrind records the
# calls made inside the loop: no try-lock with one thread, the try-lock
# with an idle second thread (the hook is there and measuring).
. "$TOP/test/integration/lib.sh"

command -v valgrind >/dev/null || fail "valgrind is missing (scripts/install-deps)"
prog="$BUILD/test/programs/contention_bench"

# trylocks MODE: how often the callgrind output of the loop names a try-lock.
trylocks() {
    env LD_PRELOAD="$AGENT" PPROF_ADDR=off PPROF_LOG=quiet valgrind \
        --tool=callgrind --toggle-collect=uncontended_loop \
        --callgrind-out-file="$WORK/cg.$1" "$prog" "$1" 1000 >/dev/null 2>&1 ||
        fail "contention_bench $1 failed under valgrind"
    grep -c trylock "$WORK/cg.$1" || true
}

single=$(trylocks uncontended_single)
two=$(trylocks uncontended)
note "try-lock named $single times with one thread, $two with two"
[ "$two" -gt 0 ] || fail "with two threads the lock hook did not try the lock: the test sees nothing"
[ "$single" -eq 0 ] || fail "with one thread the lock hook still calls the real try-lock"
echo ok
