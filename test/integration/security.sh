# Secure by default: with PPROF_TOKEN every request needs the token (Bearer,
# or basic auth with the token as password, as `go tool pprof
# http://user:TOKEN@host/...` sends it), anything else is 401; a
# non-loopback address serves only with a token; nothing of civetweb is
# reachable (no files, no listings, no PUT/DELETE effects, no traversal);
# bodies and concurrent long requests are capped.
. "$TOP/test/integration/lib.sh"

TOKEN='t0k-3n.Secret_42'
cd "$WORK"
echo "do not serve me" > "$WORK/secret.txt"
mkdir -p "$WORK/dir"

# ---- token required ----------------------------------------------------------
PPROF_TOKEN=$TOKEN start_agent burn "$BUILD/test/programs/cpu_burn" 2 60 1000
code() { curl -s -o "$WORK/body" -D "$WORK/hdr" -w '%{http_code}' --max-time 20 "$@"; }

for path in debug/pprof/ debug/pprof/cmdline debug/pprof/profile?seconds=1 \
            debug/pprof/heap debug/pprof/nosuch secret.txt ''; do
    c=$(code "http://$ADDR/$path")
    [ "$c" = 401 ] || fail "no credentials on /$path gave $c, expected 401"
done
grep -qi '^WWW-Authenticate: Basic realm="pprof"' "$WORK/hdr" || fail "401 without WWW-Authenticate"
c=$(code -H "Authorization: Bearer wrong" "http://$ADDR/debug/pprof/")
[ "$c" = 401 ] || fail "wrong bearer gave $c"
c=$(code -H "Authorization: Bearer ${TOKEN}x" "http://$ADDR/debug/pprof/")
[ "$c" = 401 ] || fail "token with an extra byte gave $c"
c=$(code -H "Authorization: Bearer $(echo "$TOKEN" | cut -c1-10)" "http://$ADDR/debug/pprof/")
[ "$c" = 401 ] || fail "a prefix of the token gave $c"
c=$(code -u "$TOKEN:nope" "http://$ADDR/debug/pprof/")
[ "$c" = 401 ] || fail "token as user name gave $c"
c=$(code -H "Authorization: Basic !!!notbase64" "http://$ADDR/debug/pprof/")
[ "$c" = 401 ] || fail "garbage basic auth gave $c"

c=$(code -H "Authorization: Bearer $TOKEN" "http://$ADDR/debug/pprof/")
[ "$c" = 200 ] || fail "right bearer gave $c"
expect_contains "$(cat "$WORK/body")" "threadcreate"
c=$(code -u "anyone:$TOKEN" "http://$ADDR/debug/pprof/cmdline")
[ "$c" = 200 ] || fail "basic auth with the token as password gave $c"
expect_contains "$(tr '\0' ' ' < "$WORK/body")" "cpu_burn 2 60"

# go tool pprof with the token in the URL: Go's client sends basic auth.
host=${ADDR%:*}; port=${ADDR##*:}
top=$(pprof -top "http://user:$TOKEN@$host:$port/debug/pprof/profile?seconds=2")
echo "$top" | head -n 12
expect_contains "$top" "hot_a" "pprof through basic auth"
if go tool pprof -top "http://user:wrong@$host:$port/debug/pprof/heap" >"$WORK/bad.out" 2>&1; then
    fail "go tool pprof with a wrong token succeeded"
fi
grep -q 401 "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "pprof did not show the 401"; }
stop "$PID"

# ---- non-loopback needs a token --------------------------------------------
PPROF_ADDR=0.0.0.0:0 PPROF_TOKEN=$TOKEN start_agent open "$BUILD/test/programs/cpu_burn" 1 30 1000
case "$ADDR" in 0.0.0.0:*) ;; *) fail "bound $ADDR, expected 0.0.0.0";; esac
ADDR=127.0.0.1:${ADDR##*:}
c=$(code "http://$ADDR/debug/pprof/")
[ "$c" = 401 ] || fail "open address without credentials gave $c"
c=$(code -H "Authorization: Bearer $TOKEN" "http://$ADDR/debug/pprof/")
[ "$c" = 200 ] || fail "open address with the token gave $c"
stop "$PID"
env LD_PRELOAD="$AGENT" PPROF_ADDR=0.0.0.0:0 PPROF_PORT_FILE="$WORK/refused.port" \
    sh -c 'sleep 0.5; echo alive' >"$WORK/refused.out" 2>"$WORK/refused.err"
[ "$(cat "$WORK/refused.out")" = alive ] || fail "the refused host changed output"
grep -q 'refusing to serve on 0.0.0.0:0 without PPROF_TOKEN' "$WORK/refused.err" || fail "no refusal message"
[ ! -e "$WORK/refused.port" ] || fail "a non-loopback address without a token was bound"

# ---- nothing but the profiles ----------------------------------------------
start_agent plain "$BUILD/test/programs/cpu_burn" 1 60 1000
for path in secret.txt /secret.txt dir/ '' debug/pprof/../../secret.txt \
            debug/pprof/%2e%2e/%2e%2e/etc/passwd ../../../../etc/passwd \
            debug/pprof/..%2f..%2f..%2fetc%2fpasswd %2fetc%2fpasswd \
            debug/pprof/heap/ 'secret.txt%00'; do
    c=$(curl -s --path-as-is -o "$WORK/body" -w '%{http_code}' --max-time 20 "http://$ADDR/$path")
    case "$c" in 2*) fail "/$path gave $c";; esac
    if grep -q -e 'do not serve me' -e 'root:' "$WORK/body"; then fail "/$path leaked a file"; fi
done
for m in PUT DELETE MKCOL PROPFIND PATCH OPTIONS TRACE CONNECT; do
    c=$(curl -s -o "$WORK/body" -w '%{http_code}' --max-time 20 -X "$m" \
        --data-binary @"$WORK/secret.txt" "http://$ADDR/secret.txt" || true)
    case "$c" in 2*) fail "$m /secret.txt gave $c";; esac
    c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -X "$m" \
        --data-binary 'x' "http://$ADDR/newfile" || true)
    case "$c" in 2*) fail "$m /newfile gave $c";; esac
done
# civetweb decodes %00 and the path ends there: the request reaches the
# route named before it and nothing else.
c=$(curl -s -o "$WORK/body" -w '%{http_code}' "http://$ADDR/debug/pprof/cmdline%00.txt")
[ "$c" = 200 ] && expect_contains "$(tr '\0' ' ' < "$WORK/body")" "cpu_burn 1 60"
c=$(curl -s --path-as-is -o "$WORK/body" -w '%{http_code}' "http://$ADDR/debug/pprof/%00/../../secret.txt")
expect_contains "$(cat "$WORK/body")" "Types of profiles available" "%00 then traversal"
[ "$(cat "$WORK/secret.txt")" = "do not serve me" ] || fail "a method changed a file"
[ ! -e "$WORK/newfile" ] || fail "a method created a file"
# As Go: any method on a profile behaves like GET.
c=$(curl -s -o "$WORK/body" -w '%{http_code}' -X PUT "http://$ADDR/debug/pprof/cmdline")
[ "$c" = 200 ] || fail "PUT cmdline gave $c"

# Bodies over 1 MiB: 413, nothing read; the server goes on.
head -c 2000000 /dev/zero | tr '\0' '1' > "$WORK/big"
c=$(curl -s -o "$WORK/body" -w '%{http_code}' --max-time 20 --data-binary @"$WORK/big" \
    "http://$ADDR/debug/pprof/symbol")
[ "$c" = 413 ] || fail "a 2 MB body gave $c, expected 413"
# Header lines beyond the request size limit: refused, server still answers.
long=$(head -c 40000 /dev/zero | tr '\0' 'a')
c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 -H "X-Long: $long" \
    "http://$ADDR/debug/pprof/" || true)
case "$c" in 2*) fail "a 40 kB header was accepted ($c)";; esac
[ "$(http_status debug/pprof/)" = 200 ] || fail "index after oversized requests"

# Long requests: 8 at a time (a CPU profile or a delta holds a thread of
# its own); the 9th gets 503, cheap endpoints keep answering meanwhile.
LONG=""
for i in 1 2 3 4 5 6 7 8; do
    curl -s -o "$WORK/long$i" -w '%{http_code}' --max-time 30 \
        "http://$ADDR/debug/pprof/threadcreate?seconds=4" > "$WORK/long$i.code" &
    LONG="$LONG $!"
done
# Until all 8 run, each on its thread (named pprofagent-long).
i=0
while [ "$(cat /proc/"$PID"/task/*/comm 2>/dev/null | grep -c '^pprofagent-long$')" -lt 8 ]; do
    i=$((i + 1))
    [ $i -le 200 ] || fail "8 long requests did not all start within 10 s"
    sleep 0.05
done
c=$(curl -s -o "$WORK/body" -w '%{http_code}' "http://$ADDR/debug/pprof/profile?seconds=1")
[ "$c" = 503 ] || fail "a 9th long request gave $c, expected 503"
expect_contains "$(cat "$WORK/body")" "too many profiles in progress"
[ "$(http_status debug/pprof/)" = 200 ] || fail "index while long requests run"
[ "$(http_status debug/pprof/threadcreate)" = 200 ] || fail "snapshot while long requests run"
# shellcheck disable=SC2086
wait $LONG
for i in 1 2 3 4 5 6 7 8; do
    [ "$(cat "$WORK/long$i.code")" = 200 ] || fail "long request $i: $(cat "$WORK/long$i.code")"
done
[ "$(http_status 'debug/pprof/profile?seconds=1')" = 200 ] || fail "slots not released"

# Parameters too long or absurd: 400, not silently the default.
for v in 123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890 \
         -9223372036854775808 9223372036854775808 0x10 '1%00' '%201' '1e3' '0%2C5'; do
    c=$(http_status "debug/pprof/profile?seconds=$v")
    [ "$c" = 400 ] || fail "profile?seconds=$v gave $c"
    c=$(http_status "debug/pprof/threadcreate?seconds=$v")
    [ "$c" = 400 ] || fail "threadcreate?seconds=$v gave $c"
done
kill -0 "$PID" || fail "the host died"
stop "$PID"
echo ok
