# pprof-attach on a program whose work starts after the attach
# (attach_late): the thread it starts then is profiled with its whole
# stack (late_burn and late_thread above the leaf, with the CPU the
# thread's own clock counted over the profile, within 10%), and its
# creation is in the threadcreate profile: the agent's pthread_create is
# one of the doors bound at the attach. After the detach, a thread
# started through the address of pthread_create the program read while
# attached (the agent's door, inert now) runs and is joined, as one
# started through the program's PLT (put back).
#
# A shared object the program dlopens after the attach has its malloc
# bound to the agent once the agent finds it (the rescanner; the program
# waits until its GOT's malloc leads there): what it allocates then is in the allocs profile as the program counted it
# (PPROF_HEAP_RATE=1), and the detach puts its relocations back with the
# others.
#
# Two threads the program deadlocks after the attach are said by the
# watch on its stderr, which an attached agent now runs; after the detach
# no thread of the agent is left.
. "$TOP/test/integration/lib.sh"

ATTACH="$BUILD/pprof-attach"
[ -x "$ATTACH" ] || fail "no $ATTACH (make test-bins builds it)"
ASK="$WORK/ask"
mkdir -p "$ASK"
"$BUILD/test/programs/attach_late" "$ASK" "$BUILD/test/programs/libattach_plugin.so" \
    >"$WORK/target.out" 2>"$WORK/target.err" &
PID=$!
PIDS="$PIDS $PID"
wait_until "the target to start" grep -q started "$WORK/target.out"

# ask WHAT LINE: makes the target do WHAT and waits for its line LINE.
ask() {
    touch "$ASK/$1"
    wait_until "the target's '$2' line" grep -q "^$2" "$WORK/target.out"
}

PPROF_HEAP_RATE=1 PPROF_DEADLOCK_SECONDS=1 PPROF_ADDR=127.0.0.1:0 "$ATTACH" "$PID" 2>"$WORK/attach.err" ||
    { cat "$WORK/attach.err" >&2; fail "pprof-attach $PID failed"; }
ADDR=$(sed -n 's|^pprofagent: serving http://\([^/]*\)/debug/pprof/ (pid [0-9]*)$|\1|p' "$WORK/attach.err")
[ -n "$ADDR" ] || fail "pprof-attach printed no serving line"
note "$(grep 'relocations' "$WORK/target.err")"

# --- a thread started after the attach: its whole stack ---
ask thread "late tid="
late_tid=$(sed -n 's/^late tid=\([0-9]*\).*/\1/p' "$WORK/target.out")
note "$(grep '^late' "$WORK/target.out")"
profile_against_clock "$late_tid" late
top=$(pprof -top -cum -unit=ms -nodecount=30 "$WORK/cpu.pb.gz")
echo "$top" | head -n 12
for f in late_burn late_thread; do
    within 10 "$(top_cum "$top" "$f")" "$want" "$f (the late thread's callers of spin) after the attach"
done
expect_contains "$(grep '^late' "$WORK/target.out")" "door=libpprofagent.so" \
    "the address of pthread_create the program read while attached"
expect_contains "$(pprof -traces "http://$ADDR/debug/pprof/threadcreate")" "start_late" \
    "the threadcreate profile after the attach"

# --- a shared object loaded after the attach: its allocations ---
ask load loaded
ask alloc "plugin "
note "$(grep '^bound after' "$WORK/target.out")"
note "$(grep 'more relocations' "$WORK/target.err")"
expect_contains "$(grep '^bound after' "$WORK/target.out")" "door=libpprofagent.so" \
    "where the loaded object's malloc leads"
truth=$(sed -n 's/^plugin //p' "$WORK/target.out")
fetch debug/pprof/allocs >"$WORK/allocs.pb.gz"
sites=$(pprof -raw "$WORK/allocs.pb.gz" | awk -f "$TOP/test/integration/heap_sites.awk")
got=$(printf '%s\n' "$sites" | awk '$1 == "plugin_block" { print $4, $5 }')
if [ "$got" != "$truth" ]; then
    printf '%s\n' "$sites" | head -n 20 >&2
    fail "allocs of plugin_block: '${got:-none}', the program counted '$truth' (objects, bytes)"
fi
note "allocs of plugin_block, in the object loaded after the attach: $got, as the program counted"

# --- a deadlock after the attach: the watch says it ---
ask deadlock "lockers "
a=$(sed -n 's/^lockers a=\([0-9]*\) .*/\1/p' "$WORK/target.out")
b=$(sed -n 's/^lockers .* b=\([0-9]*\)$/\1/p' "$WORK/target.out")
wait_until "the watch's deadlock line" grep -q 'deadlock:' "$WORK/target.err"
line=$(grep 'deadlock:' "$WORK/target.err")
note "$line"
for t in "\"locker-a\" ($a) waits in take_ab" "\"locker-b\" ($b) waits in take_ba"; do
    expect_contains "$line" "$t" "the watch's line after the attach"
done

# --- detached: every relocation put back, the late object's too ---
"$ATTACH" --detach "$PID" 2>"$WORK/detach.err" ||
    { cat "$WORK/detach.err" >&2; fail "pprof-attach --detach failed"; }
bound=$(sed -n 's/.*attach: \([0-9]*\) of [0-9]* relocations.*/\1/p' "$WORK/target.err")
more=$(sed -n 's/.*attach: \([0-9]*\) more relocations.*/\1/p' "$WORK/target.err" | awk '{ n += $1 } END { print n + 0 }')
back=$(sed -n 's/.* \([0-9]*\) relocations put back.*/\1/p' "$WORK/target.err")
note "bound at the attach $bound, later $more, put back $back"
agents=$(cat /proc/"$PID"/task/*/comm | grep '^civetweb-\|^pprof' || true)
[ -z "$agents" ] || fail "threads of the agent left after the detach: $agents"
[ "$back" = $((bound + more)) ] ||
    fail "$back relocations put back at the detach, $bound bound at the attach and $more later"

# --- detached: threads through the inert door and through the PLT ---
ask after "after ok="
note "$(grep '^after' "$WORK/target.out")"
expect_contains "$(grep '^after' "$WORK/target.out")" "after ok=2 door=libpprofagent.so" \
    "threads started after the detach"

touch "$ASK/stop"
wait_exit "$PID" 60
[ "$STATUS" = 0 ] || fail "the target exited with $STATUS"
