# Threads blocked in calls a signal would cut short (epoll_wait, poll,
# nanosleep, a timed condition wait) and one in a pipe read, each in its own
# named function (test/programs/blocked_threads): goroutine?debug=2 shows
# each thread's whole stack, its function included, and none of them ever
# sees an EINTR (the program prints every one). The programs keep frame
# pointers, so the walk from /proc's stack pointer must also find the frame
# pointer the kernel does not report, and not be fooled by stale frame
# records in the main thread's frame.
. "$TOP/test/integration/lib.sh"
prog="$BUILD/test/programs/blocked_threads"

start_agent blocked "$prog" 30
for i in $(seq 100); do grep -q '^started' "$WORK/blocked.out" && break; sleep 0.05; done
sleep 0.3
block() { printf '%s\n' "$dump" | awk -v n="thread \"$1\"]:" '$1 == "goroutine" && index($0, n) {p = 1; next} /^$/ {p = 0} p'; }
for round in 1 2 3; do
    dump=$(fetch "debug/pprof/goroutine?debug=2")
    [ "$round" = 1 ] && printf '%s\n' "$dump"
    for t in epoll-waiter:wait_in_epoll poller:wait_in_poll \
             pipe-reader:wait_in_read sleeper:wait_in_sleep \
             timed-waiter:wait_in_timedwait; do
        name=${t%%:*} fn=${t#*:}
        b=$(block "$name")
        expect_contains "$b" "$fn(...)" "$name's stack"
        expect_contains "$b" "run(...)" "$name's stack"
        expect_not_contains "$b" "stack unavailable" "$name's stack"
    done
    # debug=1 and debug=0 aggregate the same stacks.
    expect_contains "$(fetch 'debug/pprof/goroutine?debug=1')" "wait_in_epoll+"
done
expect_contains "$dump" "blocked threads walked without a signal"
note "$(printf '%s\n' "$dump" | grep 'walked without a signal')"
top=$(pprof -top "http://$ADDR/debug/pprof/goroutine")
expect_contains "$top" "wait_in_timedwait"
out=$(cat "$WORK/blocked.out")
expect_not_contains "$out" "EINTR in" "the host's output"
stop "$PID"

# The main thread sleeps under main, whose frame holds stale return
# addresses (two sigset_t, mostly unwritten): its walk must go through main
# to _start, not wander into a stale frame record. What the stale words
# hold changes with the layout of each run: several runs.
for run in 1 2 3 4 5 6; do
    start_agent "main$run" "$prog" 10
    for i in $(seq 100); do grep -q '^started' "$WORK/main$run.out" && break; sleep 0.05; done
    dump=$(fetch "debug/pprof/goroutine?debug=2")
    b=$(block blocked_threads)
    expect_contains "$b" "main(...)" "the main thread's stack"
    expect_contains "$b" "_start(...)" "the main thread's stack (run $run)"
    stop "$PID"
done
echo ok
