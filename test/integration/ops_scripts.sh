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

# Addresses are checked by the agent's rules: a non-loopback address needs
# a token, and what the agent would refuse is refused here, with no file.
for bad in 0.0.0.0:6060 :6060 '[fe80::1]:6060' garbage 127.0.0.1 127.0.0.1:65536 300.1.1.1:80 'unix:/tmp/s'; do
    if sh "$TOP/scripts/pprof-systemd" install myservice "$bad" "$AGENT" >"$WORK/bad.out" 2>"$WORK/bad.err"; then
        fail "pprof-systemd accepted '$bad' without a token"
    fi
    [ ! -e "$conf" ] || fail "a drop-in was written for '$bad'"
done
expect_contains "$(cat "$WORK/bad.err")" "is not an address the agent serves on"
sh "$TOP/scripts/pprof-systemd" install myservice 0.0.0.0:6060 "$AGENT" 2>"$WORK/bad.err" && fail "0.0.0.0 without a token"
expect_contains "$(cat "$WORK/bad.err")" "set PPROF_TOKEN"
for good in 127.0.0.1:0 localhost:6060 '[::1]:6060' off; do
    sh "$TOP/scripts/pprof-systemd" install myservice "$good" "$AGENT" >/dev/null \
        || fail "pprof-systemd refused '$good'"
done
# With a token: it goes into the drop-in, which only root can read.
PPROF_TOKEN=s3cret-token sh "$TOP/scripts/pprof-systemd" install myservice 0.0.0.0:6060 "$AGENT" >/dev/null \
    || fail "pprof-systemd refused 0.0.0.0 with a token"
grep -qx 'Environment="PPROF_TOKEN=s3cret-token"' "$conf" || { cat "$conf"; fail "no token line"; }
[ "$(stat -c %a "$conf")" = 600 ] || fail "a drop-in with a token is mode $(stat -c %a "$conf")"
! grep -q '^ExecPaths' "$conf" || fail "ExecPaths for a unit that is not hardened"
sh "$TOP/scripts/pprof-systemd" remove myservice >/dev/null

# A hardened unit (Debian's redis-server.service: NoExecPaths=/ and an
# ExecPaths= list) gets the ExecPaths= line the agent needs: the library,
# and those of its dependencies the list does not cover.
cat > "$SYSTEMD_DIR/redis-server.service" <<'UNIT'
[Service]
ExecStart=/usr/bin/redis-server /etc/redis/redis.conf
NoExecPaths=/
ExecPaths=/usr/bin/redis-server /usr/lib /lib
UNIT
out=$(sh "$TOP/scripts/pprof-systemd" install redis-server 127.0.0.1:6060 "$AGENT")
echo "$out"
rconf="$SYSTEMD_DIR/redis-server.service.d/pprofagent.conf"
cat "$rconf"
grep -qx "ExecPaths=$AGENT" "$rconf" || fail "no ExecPaths= line for the library in a hardened unit"
expect_contains "$out" "added ExecPaths="
# A narrower list: every dependency outside it is added too.
sed -i 's|^ExecPaths=.*|ExecPaths=/usr/bin/redis-server|' "$SYSTEMD_DIR/redis-server.service"
sh "$TOP/scripts/pprof-systemd" install redis-server 127.0.0.1:6060 "$AGENT" >/dev/null
line=$(sed -n 's/^ExecPaths=//p' "$rconf")
for dep in "$AGENT" $(ldd "$AGENT" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p'); do
    case " $line " in *" $dep "*) ;; *) fail "ExecPaths= lacks $dep: $line" ;; esac
done
# A later empty NoExecPaths= resets the list (a local override): no line.
mkdir -p "$SYSTEMD_DIR/redis-server.service.d"
printf '[Service]\nNoExecPaths=\n' > "$SYSTEMD_DIR/redis-server.service.d/local.conf"
sh "$TOP/scripts/pprof-systemd" install redis-server 127.0.0.1:6060 "$AGENT" >/dev/null
! grep -q '^ExecPaths' "$rconf" || { cat "$rconf"; fail "ExecPaths= although NoExecPaths was reset"; }

# Snapshot of a live process.
start_agent spawner "$BUILD/test/programs/spawner" 60
snap="$WORK/snap"
sh "$TOP/scripts/pprof-snapshot" "$ADDR" "$snap" 1 > "$WORK/snap.log" 2>&1 || { cat "$WORK/snap.log"; fail "pprof-snapshot failed"; }
cat "$WORK/snap.log"
for f in index.html cmdline.txt threadcreate.pb.gz threadcreate.txt peak.pb.gz \
        profile.pb.gz wall.pb.gz wall.txt taken-at; do
    [ -s "$snap/$f" ] || fail "snapshot lacks $f"
done
expect_contains "$(cat "$snap/threadcreate.txt")" "spawn_pool" "threadcreate summary"
expect_contains "$(cat "$snap/cmdline.txt")" "spawner 60" "cmdline summary"
# The saved proto is usable on its own, as -base for a later snapshot.
pprof -top -base "$snap/threadcreate.pb.gz" "$snap/threadcreate.pb.gz" > "$WORK/base.txt"
stop "$PID"
echo ok
