# Serving on IPv6 literals: [::1] (any spelling of the loopback) without a
# token, any other IPv6 address only with PPROF_TOKEN, as for IPv4; curl
# and go tool pprof read the profiles.
. "$TOP/test/integration/lib.sh"

python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null ||
    { echo "ok (skipped: no IPv6 loopback on this machine)"; exit 0; }

get6() { curl -sS -g --max-time 60 "$@"; }
code6() { curl -s -g -o /dev/null -w '%{http_code}' --max-time 60 "$@"; }

# Port 0 on [::1]: the port file, the one line and the endpoints.
PPROF_ADDR='[::1]:0' start_agent v6 "$BUILD/test/programs/cpu_burn" 1 60 1000
case "$ADDR" in "[::1]:"[0-9]*) ;; *) fail "port file says $ADDR, want [::1]:PORT" ;; esac
grep -qFx "pprofagent: serving http://$ADDR/debug/pprof/ (pid $PID)" "$WORK/v6.err" ||
    { cat "$WORK/v6.err"; fail "no serving line with the IPv6 URL"; }
expect_contains "$(get6 "http://$ADDR/debug/pprof/")" "threadcreate" "index over IPv6"
[ "$(code6 "http://$ADDR/debug/pprof/cmdline")" = 200 ] || fail "cmdline over IPv6"
top=$(pprof -top "http://$ADDR/debug/pprof/profile?seconds=2")
expect_contains "$top" "burn" "CPU profile over IPv6"
stop "$PID"

# A fixed port, the loopback written in full.
port=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0)); print(s.getsockname()[1])')
PPROF_ADDR="[0:0:0:0:0:0:0:1]:$port" start_agent v6fixed "$BUILD/test/programs/cpu_burn" 1 60 1000
[ "$(code6 "http://[::1]:$port/debug/pprof/cmdline")" = 200 ] || fail "fixed port $port over IPv6"
stop "$PID"

# Any other IPv6 address needs the token, as 0.0.0.0 does.
set +e
env LD_PRELOAD="$AGENT" PPROF_ADDR='[::]:0' PPROF_PORT_FILE="$WORK/open.port" \
    "$BUILD/test/programs/batch_job" wait 0 2 >"$WORK/open.out" 2>"$WORK/open.err"
set -e
[ ! -e "$WORK/open.port" ] || fail "[::]:0 served without a token"
grep -q 'refusing to serve on \[::\]:0 without PPROF_TOKEN' "$WORK/open.err" ||
    { cat "$WORK/open.err"; fail "no refusal for [::]:0 without a token"; }
TOKEN=v6-secret
PPROF_ADDR='[::]:0' PPROF_TOKEN=$TOKEN start_agent v6open "$BUILD/test/programs/cpu_burn" 1 60 1000
port=${ADDR##*:}
[ "$(code6 "http://[::1]:$port/debug/pprof/cmdline")" = 401 ] || fail "[::] without the token is not 401"
[ "$(code6 -H "Authorization: Bearer $TOKEN" "http://[::1]:$port/debug/pprof/cmdline")" = 200 ] ||
    fail "[::] with the token is not 200"
stop "$PID"
echo ok
