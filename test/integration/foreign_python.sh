# A program nobody wrote for this project: Debian's python3 starts four
# threads under the agent; threadcreate names the interpreter's function that
# created them, with the right count, and cmdline returns its command line.
. "$TOP/test/integration/lib.sh"

script='import threading, time
ts = [threading.Thread(target=time.sleep, args=(60,)) for _ in range(4)]
for t in ts: t.start()
print("started", flush=True)
time.sleep(60)'
start_agent py /usr/bin/python3 -c "$script"
for i in $(seq 100); do grep -q started "$WORK/py.out" && break; sleep 0.05; done

top=$(pprof -top "http://$ADDR/debug/pprof/threadcreate")
echo "$top"
printf '%s\n' "$top" | grep -Eq '^ +4 +100% .* PyThread_start_new_thread$' \
    || fail "threadcreate does not put 4 threads on PyThread_start_new_thread"

fetch debug/pprof/cmdline > "$WORK/cmdline"
printf '%s\0%s\0%s' /usr/bin/python3 -c "$script" > "$WORK/expected"
cmp "$WORK/cmdline" "$WORK/expected" || fail "cmdline differs"

# The interpreter's exported function resolves through symbol.
addr=$(printf '%s\n' "$(pprof -raw "http://$ADDR/debug/pprof/threadcreate")" \
    | awk '/PyThread_start_new_thread/ && $2 ~ /^0x/ {print $2; exit}')
[ -n "$addr" ] || fail "no address for PyThread_start_new_thread in -raw"
got=$(fetch debug/pprof/symbol --data-binary "$addr")
expect_contains "$got" "$addr PyThread_start_new_thread" "symbol"
stop "$PID"
echo ok
