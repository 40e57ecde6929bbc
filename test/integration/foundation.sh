# The walking skeleton end to end: a real process under the agent on port 0,
# read with curl and go tool pprof: threadcreate names the creating
# functions with the right counts, cmdline and symbol answer as Go's do,
# errors carry Go's headers, unknown names get 404.
. "$TOP/test/integration/lib.sh"

start_agent spawner "$BUILD/test/programs/spawner" 60 second-arg "third arg"
for i in $(seq 50); do grep -q spawn_other= "$WORK/spawner.out" && break; sleep 0.1; done

# threadcreate: 3 threads from spawn_pool, 2 from spawn_other.
top=$(pprof -top "http://$ADDR/debug/pprof/threadcreate")
echo "$top"
printf '%s\n' "$top" | grep -Eq '^ +3 +60(\.00)?% .* spawn_pool$' || fail "spawn_pool does not have 3 of 5 threads"
printf '%s\n' "$top" | grep -Eq '^ +2 +40(\.00)?% .* spawn_other$' || fail "spawn_other does not have 2 of 5 threads"
expect_contains "$top" "main" "threadcreate stacks"

# The same through the text form.
text=$(fetch debug/pprof/threadcreate?debug=1)
expect_contains "$text" "threadcreate profile: total 5"
expect_contains "$text" "spawn_pool+0x"
expect_contains "$text" "spawner.c:"

# The proto carries mappings with the executable first and its build id.
raw=$(pprof -raw "http://$ADDR/debug/pprof/threadcreate")
exe_build_id=$(readelf -n "$BUILD/test/programs/spawner" | awk '/Build ID/ {print $3}')
printf '%s\n' "$raw" | grep -A2 '^Mappings' | grep -q "spawner $exe_build_id" \
    || { printf '%s\n' "$raw" | grep -A4 '^Mappings'; fail "mapping 1 is not the executable with build id $exe_build_id"; }

# cmdline: arguments separated by NUL, no trailing NUL.
fetch debug/pprof/cmdline > "$WORK/cmdline"
printf '%s\0%s\0%s\0%s' "$BUILD/test/programs/spawner" 60 second-arg "third arg" > "$WORK/cmdline.expected"
cmp "$WORK/cmdline" "$WORK/cmdline.expected" || fail "cmdline differs"

# symbol: the static function's address, GET and POST, as Go answers.
addr=$(sed -n 's/^spawn_other=//p' "$WORK/spawner.out")
got=$(fetch "debug/pprof/symbol?$addr+0x1+zzz")
expected=$(printf 'num_symbols: 1\n%s spawn_other' "$addr")
[ "$got" = "$expected" ] || fail "symbol GET gave '$got', expected '$expected'"
got=$(fetch debug/pprof/symbol --data-binary "$addr")
[ "$got" = "$expected" ] || fail "symbol POST gave '$got'"
got=$(fetch debug/pprof/symbol -X POST)
[ "$got" = "num_symbols: 1" ] || fail "empty symbol POST gave '$got'"

# Unknown names: 404 with Go's body and headers.
headers=$(curl -s -D - -o "$WORK/body" "http://$ADDR/debug/pprof/nosuchprofile")
expect_contains "$headers" "404"
expect_contains "$headers" "X-Go-Pprof: 1"
expect_contains "$headers" "Content-Type: text/plain; charset=utf-8"
[ "$(cat "$WORK/body")" = "Unknown profile" ] || fail "404 body: $(cat "$WORK/body")"
[ "$(http_status debug/pprof/threadcreate/)" = 404 ] || fail "trailing slash is not 404"
[ "$(http_status debug/pprof)" = 301 ] || fail "/debug/pprof does not redirect"
[ "$(http_status debug/pprof/threadcreate?seconds=-1)" = 400 ] || fail "bad seconds is not 400"
[ "$(http_status 'debug/pprof/threadcreate?seconds=1&debug=1')" = 400 ] || fail "seconds with debug is not 400"

# Index: lists threadcreate with its count and the settings in force.
index=$(fetch debug/pprof/)
expect_contains "$index" "<tr><td>5</td><td><a href='threadcreate?debug=1'>threadcreate</a>"
expect_contains "$index" "PPROF_HEAP_RATE"

# A profile headers as Go's.
headers=$(curl -s -D - -o /dev/null "http://$ADDR/debug/pprof/threadcreate")
expect_contains "$headers" "Content-Type: application/octet-stream"
expect_contains "$headers" 'Content-Disposition: attachment; filename="threadcreate"'
expect_contains "$headers" "X-Content-Type-Options: nosniff"

# Delta: no thread created in the window, so the delta profile is empty.
fetch 'debug/pprof/threadcreate?seconds=1' > "$WORK/delta.pb.gz"
delta=$(pprof -raw "$WORK/delta.pb.gz")
expect_not_contains "$delta" "spawn_pool" "the delta profile"

# The agent's own threads (civetweb) never show up.
expect_not_contains "$top" "mg_start" "threadcreate"
stop "$PID"
echo "ok"
