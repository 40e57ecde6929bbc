# /debug/pprof/wall with many threads parked for longer than a look comes
# round (test/programs/idle_threads: 400 threads waking every 4 to 12 s, a
# quarter each in pthread_cond_timedwait, nanosleep, epoll_wait and poll).
# A look comes round every 400 / 16 ticks (about 1.25 s at 20 Hz), so most
# looks find the thread's CPU clock unmoved since a look that found it
# blocked more than 1 s before, and charge it as that look found it with
# no /proc read (agent/wall/wall_look.c). Over an 8 s profile:
# - the comment counts such looks: more than half of all looks;
# - each of the four waits has a quarter of the idlers' wall time (within 3
#   points), the idlers' total is 400 x the profile's duration (within
#   10%), and their only state is sleeping;
# - the program sees no EINTR.
# The cost governor is off (PPROF_WALL_COST=0): these threads use so little
# CPU that it would hold the profile to about one look a tick, and a look
# would come round every 20 s (test/integration/wall_cost.sh covers it).
. "$TOP/test/integration/lib.sh"
prog="$BUILD/test/programs/idle_threads"
export PPROF_WALL_COST=0

start_agent parked "$prog" 400 14 4000
for i in $(seq 100); do grep -q '^ready' "$WORK/parked.out" && break; sleep 0.05; done
fetch "debug/pprof/wall?seconds=8" > "$WORK/wall.pb.gz"

comment=$(profile_note wall)
note "$comment"
looks=$(echo "$comment" | sed -n 's/.* \([0-9]*\) looks (.*/\1/p')
unmoved=$(echo "$comment" | sed -n 's/.*; \([0-9]*\) not run since the previous look.*/\1/p')
[ -n "$looks" ] && [ -n "$unmoved" ] || fail "the comment does not count the looks"
[ "$((unmoved * 2))" -gt "$looks" ] ||
    fail "$unmoved of $looks looks found the thread unmoved, expected more than half"

idlers_check "$WORK/wall.pb.gz" 400 3 0.1

states=$(pprof -tags -focus='^idler$' "$WORK/wall.pb.gz" | sed -n '/ state:/,/^ *$/p')
echo "$states"
expect_contains "$states" "sleeping"
expect_not_contains "$states" "running" "the idlers' states"

wait_exit "$PID" 30
[ "$STATUS" = 0 ] || fail "the program exited with $STATUS"
eintr=$(sed -n 's/.*eintr=\([0-9]*\).*/\1/p' "$WORK/parked.out")
note "EINTR seen by the program: ${eintr:-?}"
[ "$eintr" = 0 ] || fail "the program saw ${eintr:-no count of} EINTR"
echo ok
