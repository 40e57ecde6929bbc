# A thread that blocks and restores a signal around short sections (a few
# thousand mask changes a second) keeps its CPU in the profile. With
# SIGCHLD (not the agent's), its sampler is not touched at all: the profile
# holds 85-110% of the CPU the thread used over the profile's window (a
# timer re-armed with a fresh first expiry at every change, faster than the
# kernel's tick that fires CPU timers, kept 4-14%). With SIGPROF blocked
# around every other section, the sampler is paused there and resumed with
# the rest of its period (or at once when an expiry was missed): open_burn's
# CPU is in the profile (85-110%) and masked_burn's is not. With a signal
# handler after every section that changes the mask under the handler's
# own (every other signal blocked, lifted by the kernel at the handler's
# return, unseen): its sampler runs on, 85-110% of the thread's CPU (the
# sampler paused by the first such change and never resumed held about
# half, as one JVM pool thread's in jvm_cpu_truth). Profiles are taken
# until the thread used >= 1.2 s in open_burn (~300 samples).
#
# "late" is chld where the thread blocks every signal, unseen and asleep,
# for 300 ms from the profile's start, then goes on changing its mask: as
# a look at its mask finds it when it falls in the mask interposer's own
# window (every signal blocked a moment). Its next change gives it its
# sampler: 85-110% (left to the rescan a second later, 1 run in 30 of
# chld held a third).
#
# The truth: the thread's CPU clock over exactly the profile's window
# (test/integration/cpu_window.py, snapshots every 10 ms), split between
# open_burn and masked_burn as the program splits its own clock (by the
# rounds it ran in each, over the request's span). The request's span
# alone is longer than the window (the profile's set-up and encoding),
# and a loaded machine stretched it by up to a fifth.
. "$TOP/test/integration/lib.sh"

export PPROF_CPU_HZ=250
P="$BUILD/test/programs/sigmask_churn"

# check NAME FUNCTION MEASURED_NS PROFILE
check() {
    ms=$(top_cum "$(pprof -top -cum -unit=ms -nodecount=50 "$4")" "$2")
    awk -v ms="${ms:-0}" -v ns="$3" -v n="$1" -v f="$2" 'BEGIN {
        r = ms * 1e6 / ns
        printf "# %s: %s measured %.0f ms, profile %.0f ms, ratio %.3f\n", n, f, ns / 1e6, ms, r
        exit (r >= 0.85 && r <= 1.10 ? 0 : 1)
    }' || fail "$1: $2's CPU in the profile is not within 85-110% of what it measured"
}

W="$TOP/test/integration/cpu_window.py"
for sig in chld late prof handler; do
    start_agent "$sig" "$P" "$sig" 60
    # One watcher for all the profiles of this host: a python start took
    # 6-10 s at a load average of 17-19 here.
    python3 "$W" watch "$PID" "$WORK/$sig.watch" &
    WATCH=$!
    i=0
    until [ -s "$WORK/$sig.watch" ]; do
        i=$((i + 1)); [ $i -lt 2400 ] || fail "no snapshot of the host's threads in 240 s"
        sleep 0.1
    done
    for secs in 3 6 12; do
        set -- $(host_figures "$sig" open); o0=$1; m0=$2
        fetch "debug/pprof/profile?seconds=$secs" > "$WORK/$sig.pb.gz"
        set -- $(host_figures "$sig" open); o1=$1; m1=$2
        sleep 0.1 # a snapshot after the window's end
        set -- $(python3 "$W" thread "$WORK/$sig.watch" "$WORK/$sig.pb.gz" churner)
        used=$1
        # The part of the window's CPU that was open_burn's (prof) or
        # all of it (chld, handler: nothing is blocked by the thread's own
        # call that is the agent's).
        if [ "$sig" != prof ]; then
            want=$used
        else
            want=$(awk -v u="$used" -v o=$((o1 - o0)) -v m=$((m1 - m0)) \
                'BEGIN { printf "%.0f", u * o / (o + m) }')
        fi
        [ "$want" -ge 1200000000 ] && break
    done
    touch "$WORK/$sig.watch.stop"
    wait "$WATCH"
    stop "$PID"
    if [ "$sig" != prof ]; then
        check "$sig" churner "$want" "$WORK/$sig.pb.gz"
    else
        check "$sig" open_burn "$want" "$WORK/$sig.pb.gz"
        top=$(pprof -top -cum -nodecount=50 "$WORK/$sig.pb.gz")
        expect_not_contains "$top" masked_burn "SIGPROF-blocked sections"
    fi
done
echo ok
