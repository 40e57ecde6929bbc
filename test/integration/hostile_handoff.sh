# Requests that wait run on threads of the agent's own, each writing on a
# duplicate of its connection's socket (http/handoff.c,
# agent/fds_handoff.c). A program that sweeps its descriptors all the while
# (close_range from 3 up, files reopened on the low numbers, dup2 over
# 3..63, every 5 ms) must not break them: the duplicates live in the
# agent's range and are registered like every descriptor of the agent's
# (docs/descriptors.md), and no response goes to the program's files.
. "$TOP/test/integration/lib.sh"

# Until the test is done (SIGUSR1), 300 s at most: 60 s ended before the
# long requests were answered on a loaded machine (the UBSan build beside
# the other sanitizer lane).
PPROF_START_DELAY_MS=0 start_agent sweep "$BUILD/test/programs/fd_sweep" 300 "$WORK/host-file"
floor=$(( $(sh -c 'ulimit -n') - 256 ))
# Quick requests first, 300 one after another. An accepted socket has a
# low number until it is moved into the agent's range, and the sweep may
# close it or put the program's own file over it meanwhile: the agent
# then drops that connection (the client sees no answer) and never
# answers into the program's file (host-file stays empty: before, 5 of
# 1,200 such requests went unanswered, and what the agent took for its
# socket could have been the file).
bad=0
for i in $(seq 300); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 "http://$ADDR/debug/pprof/cmdline" || true)
    [ "$code" = 200 ] || bad=$((bad + 1))
done
note "quick requests while the program sweeps: $bad of 300 unanswered"
[ "$bad" -le 15 ] || fail "$bad of 300 quick requests got no answer while the program swept its descriptors"
long() { # NAME PATH
    curl -s -o "$WORK/$1" -w '%{http_code}' --max-time 60 "http://$ADDR/debug/pprof/$2" > "$WORK/$1.code" &
}
waits=""
for i in 1 2 3; do long "h$i" 'heap?seconds=8'; waits="$waits $!"; done
long p 'profile?seconds=8'; waits="$waits $!"
long f 'flamegraph?profile=heap&seconds=8'; waits="$waits $!"
# While they run: each one's socket is a number in the agent's range. The
# five clients connect in their own time (a run at load 27 counted 5 after
# 2.5 s of looking), so look until the listener and all five connections
# are seen, as long as every request still waits (8 s each from its
# accept); a socket below the range fails at once.
pending() { for w in $waits; do kill -0 "$w" 2>/dev/null || return 1; done; }
count() { # below|above: sockets under or from the floor
    ls -l "/proc/$PID/fd" 2>/dev/null | awk -v f="$floor" -v side="$1" '$NF ~ /^socket:/ &&
        ((side == "below") == ($(NF-2) + 0 < f)) {n++} END {print n + 0}'
}
high=0
low=0
while pending; do
    low=$(count below)
    [ "$low" = 0 ] || break
    high=$(count above)
    [ "$high" -ge 6 ] && break
    sleep 0.1
done
note "sockets while 5 requests wait: $high in the agent's range (from $floor), $low below"
[ "$low" = 0 ] || fail "$low sockets below the agent's range"
if [ "$high" -lt 6 ]; then
    for f in h1 h2 h3 p f; do
        [ -s "$WORK/$f.code" ] && note "$f ended: $(cat "$WORK/$f.code") $(head -c 200 "$WORK/$f" | tr -c '[:print:]' '.')"
    done
    cat "$WORK/sweep.err" >&2
    fail "a request ended before the listener and 5 connections were seen in the agent's range (last count $high)"
fi
# shellcheck disable=SC2086
wait $waits || true
for f in h1 h2 h3 p; do
    [ "$(cat "$WORK/$f.code")" = 200 ] || fail "$f answered $(cat "$WORK/$f.code") ($(head -c 200 "$WORK/$f"))"
    go tool pprof -raw "$WORK/$f" > "$WORK/$f.raw" 2>&1 || { cat "$WORK/$f.raw" >&2; fail "$f: not a profile"; }
done
[ "$(cat "$WORK/f.code")" = 200 ] || fail "flame graph answered $(cat "$WORK/f.code")"
expect_contains "$(head -c 300 "$WORK/f")" "<svg" "flame graph"
note "three heap deltas, a CPU profile and a flame graph answered while the program swept its descriptors"
kill -USR1 "$PID"
wait_exit "$PID" 60
[ "$STATUS" = 0 ] || { cat "$WORK/sweep.err" >&2; fail "fd_sweep exited $STATUS"; }
note "$(cat "$WORK/sweep.out")"
grep -qx 'written=0' "$WORK/sweep.out" || fail "something wrote into the program's file: $(grep written "$WORK/sweep.out")"
echo ok
