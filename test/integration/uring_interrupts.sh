# io_uring_enter is never restarted after a signal handler ran: a signal of
# the agent's that arrives while a thread waits there fails the wait with
# EINTR. test/programs/uring_wait alternates 0.5 ms of CPU with a 1 ms wait
# in io_uring_enter (raw system calls) and counts the EINTRs (retrying).
# A threads dump never signals a thread blocked in a call the kernel does
# not restart (it walks it from /proc): up to 150 dumps, at most 2 EINTR.
# Not 0: a thread seen running may enter the wait between the dump's last
# look and its signal, a window of microseconds that grows when the
# dumping thread is descheduled in it (1 EINTR in 3,657 waits over 150
# dumps at load 8); a dump that signalled blocked threads interrupts
# dozens. A CPU profile
# (1000 Hz) and a wall profile can interrupt a wait whose thread's CPU
# timer expires in the kernel on its way into the wait: counted and
# printed, documented in docs/signals-and-cancellation.md, not asserted.
. "$TOP/test/integration/lib.sh"

P="$BUILD/test/programs/uring_wait"
# run MODE: the program for 6 s under the agent while MODE runs; prints
# "MODE: rounds=N eintr=N" and sets EINTR.
run() {
    start_agent "$1" "$P" 6
    case "$1" in
    cpu) fetch 'debug/pprof/profile?seconds=3&hz=1000' > /dev/null ;;
    wall) fetch 'debug/pprof/wall?seconds=3' > /dev/null ;;
    dump) n=0
        while [ $n -lt 150 ] && curl -s -o /dev/null --max-time 10 "http://$ADDR/debug/pprof/goroutine?debug=2"; do
            n=$((n + 1))
        done
        note "$n threads dumps" ;;
    esac
    wait_exit "$PID" 30
    [ "$STATUS" = 0 ] || fail "$1: uring_wait exited $STATUS: $(cat "$WORK/$1.out" "$WORK/$1.err")"
    line=$(grep '^rounds=' "$WORK/$1.out")
    echo "# $1: $line"
    EINTR=${line##*eintr=}
}

"$P" 0 > "$WORK/probe.out" || { cat "$WORK/probe.out"; note "skipped: the kernel refuses io_uring"; echo ok; exit 0; }
run dump
[ "$EINTR" -le 2 ] || fail "threads dumps interrupted io_uring_enter $EINTR times"
run cpu
run wall
echo ok
