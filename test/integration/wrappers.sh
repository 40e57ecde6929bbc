# Forking wrappers hand the serving role down (process/handoff.c): under
# timeout, tini, dumb-init, runuser, su and bwrap, which fork the service
# and wait, the service serves (its pid in /debug/stats, its command line,
# its CPU in the profile as it measured it), the wrapper starts nothing,
# and the serving line and the index name the wrapper. setsid (exec in
# place) is the control: the process started by hand serves, no hand-down.
# A process with two children keeps the role.
. "$TOP/test/integration/lib.sh"

B="$BUILD/test/programs/cpu_burn"
# The offer is made when the wrapper's start delay ends, and only to a
# child it has forked by then: su's PAM work took longer than the default
# second beside other work (su then served itself, as it should). Three
# seconds leave the wrappers time to fork on a loaded machine.
export PPROF_START_DELAY_MS=3000
# The default start delay (1 s): su forks the shell after PAM has run,
# which the delay must outlast.

# served_pid: the pid of the process serving on ADDR.
served_pid() {
    fetch debug/stats | sed -n 's/^{"pid": \([0-9]*\),.*/\1/p'
}

# descends CHILD ANCESTOR: CHILD is ANCESTOR or one of its descendants
# (3 generations at most: su's shell forks the command).
descends() {
    _p=$1
    for _i in 1 2 3 4; do
        [ "$_p" = "$2" ] && return 0
        _p=$(sed 's/.*) //' "/proc/$_p/stat" 2>/dev/null | cut -d' ' -f2)
        [ -n "$_p" ] || return 1
    done
    return 1
}

# check_wrapper NAME WRAPPER-COMM CMD...: CMD runs cpu_burn under a
# wrapper; the server must be cpu_burn's, handed down by the wrapper (a
# WRAPPER-COMM of "-": the process started by hand serves itself).
check_wrapper() {
    name=$1 wcomm=$2; shift 2
    start_agent "$name" "$@"
    wrapper=$PID
    wait_until "$name: a serving line" grep -q 'serving http' "$WORK/$name.err"
    served=$(served_pid)
    [ -n "$served" ] || fail "$name: /debug/stats names no pid"
    [ "$(cat "/proc/$served/comm")" = cpu_burn ] ||
        fail "$name: pid $served serves, which is $(cat "/proc/$served/comm"), not the service"
    descends "$served" "$wrapper" || fail "$name: pid $served is not the wrapper's descendant"
    cmd=$(fetch debug/pprof/cmdline | tr '\0' ' ')
    expect_contains "$cmd" "cpu_burn 1 60" "$name cmdline"
    line=$(grep 'serving http' "$WORK/$name.err")
    [ "$(grep -c '^pprofagent: serving' "$WORK/$name.err")" = 1 ] ||
        { cat "$WORK/$name.err"; fail "$name: more than one process said it serves"; }
    if [ "$wcomm" = - ]; then
        [ "$served" = "$wrapper" ] || fail "$name: pid $served serves, not $wrapper, started by hand"
        case "$line" in *"handed down"*) fail "$name: $line" ;; esac
    else
        expect_contains "$line" "(pid $served, handed down by $wcomm pid $wrapper)" "$name serving line"
        expect_contains "$(fetch debug/pprof/)" "handed down by $wcomm pid $wrapper" "$name index"
    fi
    # The service's CPU, as it measured it, is in the profile.
    PID=$served
    before=$(host_figures "$name" a)
    fetch "debug/pprof/profile?seconds=2" > "$WORK/$name.pb.gz"
    after=$(host_figures "$name" a)
    want=$(echo "$before $after" | awk '{ print int(($3 + $4 - $1 - $2) / 1000000) }')
    top=$(pprof -top -cum -unit=ms "$WORK/$name.pb.gz")
    got=$(( $(top_cum "$top" hot_a) + $(top_cum "$top" hot_b) ))
    # The profile's window lies inside the program's (the two reports
    # around it, each a signal and a line read back, which a loaded
    # machine stretches): never more than it measured, and the service's
    # two functions hold most of the samples. The wrapper's profile held
    # none of them.
    total=$(printf '%s\n' "$top" | sed -n 's/.*Total samples = \([0-9.]*\)ms.*/\1/p' | head -n 1)
    awk -v g="$got" -v w="$want" -v t="${total:-0}" 'BEGIN { exit !(w > 0 && g > 0 && g <= w * 1.1 && g >= t * 0.8) }' ||
        { printf '%s\n' "$top" | head -n 12; fail "$name: $got ms of hot_a and hot_b in the profile (of ${total:-0} ms), the service measured $want ms"; }
    note "$name: pid $served serves ($wcomm pid $wrapper), profile $got ms of the $want ms it measured"
    kill "$wrapper" "$served" 2>/dev/null || true
    wait "$wrapper" 2>/dev/null || true
}

check_wrapper timeout timeout timeout 120 "$B" 1 60 100
check_wrapper setsid - setsid "$B" 1 60 100
command -v tini > /dev/null && check_wrapper tini tini tini -s -- "$B" 1 60 100
command -v dumb-init > /dev/null && check_wrapper dumb_init dumb-init dumb-init "$B" 1 60 100
if [ "$(id -u)" = 0 ]; then
    # The service runs as nobody: the wrapper, still root, writes the port
    # file in this folder for it.
    check_wrapper runuser runuser runuser -u nobody -- "$B" 1 60 100
    check_wrapper su su su nobody -s /bin/sh -c "$B 1 60 100"
    command -v bwrap > /dev/null &&
        check_wrapper bwrap bwrap bwrap --dev-bind / / -- "$B" 1 60 100
else
    note "not root: runuser, su and bwrap not tried"
fi

# A process with two children does work of its own: it keeps the role.
start_agent two sh -c 'sleep 60 & sleep 60 & wait'
[ "$(served_pid)" = "$PID" ] || fail "a shell with two children handed the role to pid $(served_pid)"
grep -q 'handed down' "$WORK/two.err" && fail "two children: $(cat "$WORK/two.err")"
for c in $(cat "/proc/$PID/task/$PID/children"); do kill "$c"; done
stop "$PID"
echo ok
