# Service families: two unrelated programs started the same way share one
# run directory; each lists only its own family (the first process that
# loaded the agent and its descendants: a forked worker, a daemon after a
# double fork re-parented it, an exec'd child and that child's worker),
# at /debug/pprof/processes and in pprof-snapshot --all.
. "$TOP/test/integration/lib.sh"
prog="$BUILD/test/programs/fork_bench"

# start_family NAME SECS: the founder's pid in FOUNDER. The two families
# differ only in how long they live, which tells their members apart here
# (the daemon left the founder's process tree). Exec'd descendants serve
# only when asked (PPROF_EXEC_CHILDREN=serve).
start_family() {
    env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_EXEC_CHILDREN=serve \
        "$prog" family "$2" \
        >"$WORK/$1.out" 2>"$WORK/$1.err" &
    FOUNDER=$!
    PIDS="$PIDS $FOUNDER"
}
# members FOUNDER: the live processes of its family: of this test's (its
# run folder in their environment: another test may run the same program
# the same way meanwhile, as ops_children's "hold 1 30" does).
members() {
    secs=$(tr '\0' ' ' < "/proc/$1/cmdline" | awk '{ print $3 }')
    for m in $(pgrep -f "fork_bench (family|hold 1) $secs\$"); do
        if tr '\0' '\n' < "/proc/$m/environ" 2>/dev/null | grep -qx "PPROF_RUN_DIR=$PPROF_RUN_DIR"; then echo "$m"; fi
    done
}
addr_of() { awk '{ print $5 }' "$WORK/run/pid-$1" 2>/dev/null; }

start_family a 30; a=$FOUNDER
start_family b 31; b=$FOUNDER
for f in $a $b; do
    i=0
    # founder, worker, daemon, exec'd child, its worker
    while [ "$(ls "$WORK/run" 2>/dev/null | wc -l)" -lt 10 ] || [ -z "$(addr_of "$f")" ]; do
        i=$((i + 1)); [ $i -lt 150 ] || { ls -l "$WORK/run"; cat "$WORK"/*.err; fail "the families did not announce 10 processes"; }
        sleep 0.1
    done
done
sleep 0.3
ls "$WORK/run"
for f in $a $b; do
    listing=$(curl -fsS --max-time 10 "http://$(addr_of "$f")/debug/pprof/processes")
    printf 'family of %s:\n%s\n' "$f" "$listing"
    listed=$(printf '%s\n' "$listing" | awk '{ print $1 }' | sort -n | tr '\n' ' ')
    [ "$(printf '%s\n' "$listing" | wc -l)" = 5 ] || fail "family of $f lists $(printf '%s\n' "$listing" | wc -l) processes, expected 5"
    # Each listed process is a descendant of the founder: its PPROF_FAMILY
    # is the founder's, and the other founder is not listed.
    for p in $listed; do
        [ "$p" = "$f" ] && continue
        ok=0
        for m in $(members "$f"); do [ "$m" = "$p" ] && ok=1; done
        [ $ok = 1 ] || fail "family of $f lists $p, not one of its own"
    done
    other=$a; [ "$f" = "$a" ] && other=$b
    ! printf '%s\n' "$listing" | grep -q "^$other " || fail "family of $f lists the other founder $other"
    # The daemon (session leader's child, parent init or a subreaper) is
    # listed: its parent is neither the founder nor one of its children.
    daemon=0
    for p in $listed; do
        pp=$(awk '{ print $4 }' "/proc/$p/stat")
        [ "$pp" != "$f" ] && ! printf '%s\n' "$listing" | awk '{ print $1 }' | grep -qx "$pp" && daemon=$p
    done
    [ "$daemon" != 0 ] || fail "family of $f: the double-forked daemon is not listed"
    note "family of $f: 5 processes, daemon $daemon"
done

# pprof-snapshot --all takes the founder's family only.
sh "$TOP/scripts/pprof-snapshot" --all "$(addr_of "$a")" "$WORK/snap" 0 > "$WORK/snap.log" 2>&1 \
    || { cat "$WORK/snap.log"; fail "pprof-snapshot --all failed"; }
[ "$(ls -d "$WORK"/snap/*-fork_bench | wc -l)" = 5 ] || { ls "$WORK/snap"; fail "expected 5 snapshots"; }
[ ! -e "$WORK/snap/$b-fork_bench" ] || fail "the snapshot took the other family's founder"

# An invalid PPROF_FAMILY is reported in one line and starts a family.
env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_FAMILY='x y' "$prog" hold 0 0 \
    >"$WORK/bad.out" 2>"$WORK/bad.err"
grep -q 'PPROF_FAMILY="x y" is not a family id' "$WORK/bad.err" || { cat "$WORK/bad.err"; fail "no line for a bad PPROF_FAMILY"; }

for p in $(members "$a") $(members "$b"); do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
echo ok
