# The operator's scripts: the systemd drop-in goes in and out with the right
# Environment line, and a snapshot of a running process holds every profile
# with a readable summary.
. "$TOP/test/integration/lib.sh"

# systemd drop-in, into a scratch directory instead of /etc.
export SYSTEMD_DIR="$WORK/systemd"
out=$(sh "$TOP/scripts/pprof-systemd" install myservice 127.0.0.1:3333 "$AGENT")
expect_contains "$out" "systemctl restart myservice.service"
conf="$SYSTEMD_DIR/myservice.service.d/pprofagent.conf"
[ -f "$conf" ] || fail "no drop-in at $conf"
grep -qx "Environment=\"LD_PRELOAD=$AGENT\" \"PPROF_ADDR=127.0.0.1:3333\"" "$conf" \
    || { cat "$conf"; fail "drop-in Environment line"; }
grep -qx '\[Service\]' "$conf" || fail "drop-in lacks [Service]"
sh "$TOP/scripts/pprof-systemd" remove myservice >/dev/null
[ ! -e "$conf" ] || fail "drop-in still there after remove"
[ ! -d "$SYSTEMD_DIR/myservice.service.d" ] || fail "empty drop-in folder left behind"
if sh "$TOP/scripts/pprof-systemd" install ../evil 2>/dev/null; then
    fail "a unit name with a slash was accepted"
fi
if sh "$TOP/scripts/pprof-systemd" remove myservice 2>/dev/null; then
    fail "removing a missing drop-in succeeded"
fi

# Snapshot of a live process.
start_agent spawner "$BUILD/test/programs/spawner" 60
snap="$WORK/snap"
sh "$TOP/scripts/pprof-snapshot" "$ADDR" "$snap" 1 > "$WORK/snap.log" 2>&1 || { cat "$WORK/snap.log"; fail "pprof-snapshot failed"; }
cat "$WORK/snap.log"
for f in index.html cmdline.txt threadcreate.pb.gz threadcreate.txt taken-at; do
    [ -s "$snap/$f" ] || fail "snapshot lacks $f"
done
expect_contains "$(cat "$snap/threadcreate.txt")" "spawn_pool" "threadcreate summary"
expect_contains "$(cat "$snap/cmdline.txt")" "spawner 60" "cmdline summary"
# The saved proto is usable on its own, as -base for a later snapshot.
pprof -top -base "$snap/threadcreate.pb.gz" "$snap/threadcreate.pb.gz" > "$WORK/base.txt"
stop "$PID"
echo ok
