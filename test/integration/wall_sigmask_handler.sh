# A wall profile of a thread whose signal handler changes the mask under
# the handler's own (sigmask_churn handler: every other signal blocked by
# sa_mask; the handler unblocks the error signals, as OpenJDK's do, or
# sets back the mask it interrupted; the kernel lifts the handler's mask
# at its return, where no interposer sees). The churner runs all the time
# in open_burn, between handlers of a few microseconds: nearly all its
# wall time must be there, with a stack. A handler's mask change that
# leaves the wall signal blocked as it was must not mark the thread as
# blocking it (it would get no stack until the mask is read again after a
# second): before, all of its 3 s had none ([stack unavailable]).
. "$TOP/test/integration/lib.sh"

start_agent churn "$BUILD/test/programs/sigmask_churn" handler 60
fetch 'debug/pprof/wall?seconds=3' >"$WORK/wall.pb.gz"
stop "$PID"
top=$(pprof -top -cum -unit=ms -sample_index=wall -tagfocus=thread=churner "$WORK/wall.pb.gz")
echo "$top" | head -n 12
total=$(printf '%s\n' "$top" | sed -n 's/^Showing nodes accounting for \([0-9.]*\)ms.*/\1/p' | head -n 1)
burn=$(printf '%s\n' "$top" | awk '$NF == "open_burn" { v = $4; sub(/ms$/, "", v); print v; exit }')
[ -n "$total" ] || fail "no churner thread in the wall profile"
burn=${burn:-0}
note "churner: $burn ms of $total ms in open_burn"
awk -v b="$burn" -v t="$total" 'BEGIN { exit !(b >= 0.85 * t) }' ||
    fail "open_burn holds $burn of the churner's $total ms of wall time (85% asked)"
