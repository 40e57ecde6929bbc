# A worker that gives up, right after its fork and within the start delay,
# what the agent's start needs is served all the same, and so is its
# master; output and status are those without the agent.
#
# HAProxy's master forks its worker, which chroots into an empty folder,
# switches to nobody and sets RLIMIT_NPROC to 0: the agent's threads,
# started when the delay ended, met EAGAIN ("profiling endpoints are off"),
# and inside the chroot the worker could not announce itself; a CPU
# profile found no thread to arm (no /proc) and no library to compress
# with. Only the idle master was served.
#
# - test/programs/worker_drop does the same in a few lines: its worker is
#   listed by the master, its CPU profile holds worker_busy (what it spins
#   in) for the CPU time the kernel counted for it, and it still cannot
#   create a thread (the limit is the host's);
# - HAProxy 2.6 in master-worker mode (-W) with chroot, user nobody and two
#   threads, under wrk: its worker is listed and its CPU profile has
#   HAProxy's task loop; HAProxy answers, stops on SIGTERM and says the
#   same as without the agent.
. "$TOP/test/integration/lib.sh"

[ "$(id -u)" = 0 ] || fail "needs root (chroot, and a worker that leaves root)"
command -v haproxy > /dev/null || fail "haproxy is not installed (scripts/install-deps)"
command -v wrk > /dev/null || fail "wrk is not installed (scripts/install-deps)"
mkdir -m 700 "$WORK/run"
mkdir -p "$WORK/empty"

# listed N: waits until the master's process list has N processes; sets
# listing.
listed() {
    _n=0
    while :; do
        listing=$(fetch debug/pprof/processes)
        [ "$(printf '%s\n' "$listing" | grep -c 'http://' || true)" -ge "$1" ] && break
        _n=$((_n + 1))
        [ $_n -lt 600 ] || { printf '%s\n' "$listing"; ls -la "$WORK/run"; fail "waited 60 s for $1 processes in the list"; }
        sleep 0.1
    done
    printf '%s\n' "$listing"
}

# worker_url MASTER: the URL of the master's one worker in $listing,
# checked: its parent is the master.
worker_url() {
    _line=$(printf '%s\n' "$listing" | awk -v m="$1" '$2 == m')
    [ -n "$_line" ] || fail "no worker of $1 is listed"
    printf '%s\n' "$_line" | awk '{ print $4 }'
}

# ---- the small program -----------------------------------------------------
P="$BUILD/test/programs/worker_drop"
"$P" "$WORK/empty" > "$WORK/plain.out" 2>&1 &
plain=$!
wait_until "worker_drop's worker without the agent" grep -q '^worker:' "$WORK/plain.out"
kill -TERM "$plain"
wait "$plain" && plain_status=0 || plain_status=$?
cat "$WORK/plain.out"

start_agent drop "$P" "$WORK/empty"
master=$PID
listed 2
url=$(worker_url "$master")
worker=$(printf '%s\n' "$listing" | awk -v m="$master" '$2 == m { print $1 }')
wait_until "the worker's line" grep -q '^worker:' "$WORK/drop.out"
grep -q '^worker: new thread: Resource temporarily unavailable$' "$WORK/drop.out" ||
    { cat "$WORK/drop.out"; fail "the worker's RLIMIT_NPROC is not what it set"; }
# The truth: the worker's threads' CPU clocks over exactly the profile's
# window (the request's span is longer: at a load average of 22 the
# worker's CPU over it was 640 ms against 470 in a 2 s profile).
W="$TOP/test/integration/cpu_window.py"
python3 "$W" watch "$worker" "$WORK/drop.watch" &
watcher=$!
wait_until "a snapshot of the worker's threads" test -s "$WORK/drop.watch"
curl -sS --max-time 60 -o "$WORK/drop.pb" "${url}profile?seconds=2" || fail "the worker's profile"
sleep 0.1 # a snapshot after the window's end
touch "$WORK/drop.watch.stop"
wait "$watcher"
window=$(python3 "$W" compare "$WORK/drop.watch" "$WORK/drop.pb" 0) || fail "cpu_window.py compare"
printf '%s\n' "$window"
set -- $(printf '%s\n' "$window" | sed -n 's/^# threads measured \([0-9]*\) ms, profile \([0-9]*\) ms.*/\1 \2/p')
measured=$1
top=$(pprof -top -unit=ms "$WORK/drop.pb")
printf '%s\n' "$top" | head -n 10
busy=$(flat_ms "$top" worker_busy)
[ -n "$busy" ] || fail "worker_busy is not in the worker's CPU profile"
total=$(printf '%s\n' "$top" | sed -n 's/.*Total samples = \([0-9.]*\)ms.*/\1/p')
awk -v b="$busy" -v t="$total" 'BEGIN { exit !(t > 0 && b >= 0.9 * t) }' ||
    fail "worker_busy has $busy ms of the worker's $total ms"
within 25 "$total" "$measured" "the worker's CPU profile against its threads' CPU over its window"
fetch debug/pprof/cmdline | grep -q worker_drop || fail "the master does not answer"
kill -TERM "$master"
wait_exit "$master" 30
cmp -s "$WORK/plain.out" "$WORK/drop.out" || { diff "$WORK/plain.out" "$WORK/drop.out" >&2; fail "worker_drop's output changed"; }
[ "$STATUS" = "$plain_status" ] || fail "worker_drop: status $STATUS under the agent, $plain_status without"
note "worker_drop: worker served and profiled, same output, status $STATUS"

# ---- HAProxy ---------------------------------------------------------------
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$WORK/haproxy.cfg" <<EOF
global
    user nobody
    group nogroup
    chroot $WORK/empty
    nbthread 2
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend fe
    bind 127.0.0.1:$port
    http-request return status 200 content-type text/plain string ok
EOF

# answers: HAProxy's frontend says ok.
answers() { [ "$(curl -s --max-time 5 "http://127.0.0.1:$port/")" = ok ]; }
# handles_term PID: PID has its SIGTERM handler (HAProxy's master sets it
# after "Loading success": a SIGTERM before that kills it, status 143).
handles_term() {
    _m=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$1/status")
    [ -n "$_m" ] && [ $(((0x$_m >> 14) & 1)) = 1 ]
}

haproxy -W -f "$WORK/haproxy.cfg" > "$WORK/hap-plain.out" 2>&1 &
hp=$!
PIDS="$PIDS $hp"
wait_until "HAProxy answers without the agent" answers
wait_until "HAProxy's master handles SIGTERM without the agent" handles_term "$hp"
kill -TERM "$hp"
wait "$hp" && hp_status=0 || hp_status=$?

start_agent hap haproxy -W -f "$WORK/haproxy.cfg"
master=$PID
wait_until "HAProxy answers under the agent" answers
listed 2
url=$(worker_url "$master")
worker=$(printf '%s\n' "$listing" | awk -v m="$master" '$2 == m { print $1 }')
[ "$(stat -c %U "/proc/$worker")" = nobody ] || fail "HAProxy's worker runs as $(stat -c %U "/proc/$worker")"
wrk -t 1 -c 4 -d 6s "http://127.0.0.1:$port/" > "$WORK/wrk.out" 2>&1 &
PIDS="$PIDS $!"
top=$(pprof -top "${url}profile?seconds=3")
printf '%s\n' "$top" | head -n 12
expect_contains "$top" "run_tasks_from_lists" "HAProxy's worker CPU profile"
fetch debug/pprof/cmdline | grep -q haproxy || fail "HAProxy's master does not answer"
wait_until "wrk ends" grep -q 'Requests/sec' "$WORK/wrk.out"
answers || fail "HAProxy stopped answering"
wait_until "HAProxy's master handles SIGTERM" handles_term "$master"
kill -TERM "$master"
wait_exit "$master" 30
[ "$STATUS" = "$hp_status" ] || fail "HAProxy: status $STATUS under the agent, $hp_status without"
# The same lines but for pids and the agent's own.
norm() { grep -v '^pprofagent:' "$1" | sed 's/[0-9][0-9]*/N/g'; }
norm "$WORK/hap-plain.out" > "$WORK/hap-plain.norm"
cat "$WORK/hap.out" "$WORK/hap.err" > "$WORK/hap.all"
norm "$WORK/hap.all" > "$WORK/hap.norm"
cmp -s "$WORK/hap-plain.norm" "$WORK/hap.norm" || { diff "$WORK/hap-plain.norm" "$WORK/hap.norm" >&2; fail "HAProxy's output changed"; }
note "HAProxy: worker served and profiled, same output, status $STATUS"
echo ok
