# Every worker of a multi-process service can be profiled: nginx (master
# plus 2 workers forked without exec, workers switched to user nobody) runs
# under the agent and under load; each worker announces its own server in
# the run directory, the master's index and /debug/pprof/processes list
# them all, and a CPU profile taken from a worker shows nginx's request
# path in that worker (its cmdline is "nginx: worker process").
. "$TOP/test/integration/lib.sh"
. "$TOP/test/integration/services.sh"
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || fail "nginx is not installed (scripts/install-deps)"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

port=$(free_port)
# As the agent makes it (and /run/pprofagent is): only root may read it,
# not the workers once they run as nobody.
mkdir -m 700 "$WORK/run"
# A page that gzip compresses on every request: CPU in each worker.
nginx_site 1 200000
nginx_conf "$port" "master_process on; worker_processes 2;" "gzip_comp_level 9;"

export PPROF_RUN_DIR="$WORK/run"
start_agent nginx "$NGINX" -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log"
master=$PID
master_addr=$ADDR

# Load: 4 clients asking for the gzipped page, until the test ends.
python3 - "$port" 60 <<'PY' >"$WORK/load.out" 2>&1 &
import http.client, sys, threading, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
end = time.time() + secs
count = [0]
def client():
    while time.time() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            for _ in range(50):
                c.request("GET", "/page.txt", headers={"Accept-Encoding": "gzip"})
                r = c.getresponse(); r.read()
                assert r.status == 200
                count[0] += 1
            c.close()
        except Exception as e:
            time.sleep(0.05)
ts = [threading.Thread(target=client) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print("requests", count[0])
PY
load=$!
PIDS="$PIDS $load"

# The workers announce themselves (a moment after the fork).
i=0
while :; do
    listing=$(fetch debug/pprof/processes)
    n=$(printf '%s\n' "$listing" | grep -c 'http://' || true)
    [ "$n" -ge 3 ] && break
    i=$((i + 1)); [ $i -lt 100 ] || { printf '%s\n' "$listing"; ls -la "$WORK/run"; fail "expected master + 2 workers in the run directory"; }
    sleep 0.1
done
printf '%s\n' "$listing"
workers=$(pgrep -P "$master" || true)
[ "$(echo $workers | wc -w)" = 2 ] || fail "expected 2 nginx workers, found: $workers"
for w in $workers; do
    line=$(printf '%s\n' "$listing" | awk -v p="$w" '$1 == p')
    [ -n "$line" ] || fail "worker $w is not listed"
    [ "$(echo "$line" | awk '{print $2}')" = "$master" ] || fail "worker $w: ppid is not the master"
    [ "$(stat -c %U /proc/$w)" = nobody ] || note "worker $w runs as $(stat -c %U /proc/$w)"
done
printf '%s\n' "$listing" | grep -q "^$master .* self$" || fail "the master does not mark itself"

# The master's index page links to every worker.
index=$(fetch debug/pprof/)
for w in $workers; do
    url=$(printf '%s\n' "$listing" | awk -v p="$w" '$1 == p { print $4 }')
    addr=${url#http://}; addr=${addr%%/*}
    expect_contains "$index" "href='http://$addr/debug/pprof/'" "master index (worker $w)"
done

# Each worker serves its own profiles: cmdline, and a CPU profile under
# load that shows the compression of responses in that worker.
for w in $workers; do
    url=$(printf '%s\n' "$listing" | awk -v p="$w" '$1 == p { print $4 }')
    cmd=$(curl -sS --max-time 10 "${url}cmdline" | tr '\0' ' ')
    expect_contains "$cmd" "nginx: worker process" "worker $w cmdline"
    # A worker that gave up root cannot read the master's folder: it still
    # lists itself.
    curl -sS --max-time 10 "${url}processes" | grep -q "^$w $master .* self$" \
        || { curl -sS "${url}processes"; fail "worker $w does not list itself"; }
    top=$(pprof -top "${url}profile?seconds=3")
    printf '%s\n' "$top" | head -n 14
    # Debian's nginx exports its global functions (names from .dynsym);
    # its static ones (the gzip filter itself) show as [nginx].
    expect_contains "$top" " deflate" "worker $w CPU profile"
    expect_contains "$top" "ngx_http_output_filter" "worker $w CPU profile"
    expect_contains "$top" "ngx_spawn_process" "worker $w CPU profile (forked by the master)"
    cpu=$(printf '%s\n' "$top" | awk '$NF == "deflate" { print $4 }')
    note "worker $w: deflate $cpu of its CPU"
done
# The master does no request work: its own profile has no compression.
mtop=$(pprof -top "http://$master_addr/debug/pprof/profile?seconds=1")
expect_not_contains "$mtop" "deflate" "master CPU profile"

# Graceful stop: nginx ends as it would without the agent.
kill -QUIT "$master"
wait "$master" 2>/dev/null || true
kill "$load" 2>/dev/null || true
grep -q "requests" "$WORK/load.out" || true
! grep -q '\[emerg\]\|\[alert\]' "$WORK/nginx-error.log" || { cat "$WORK/nginx-error.log"; fail "nginx logged errors"; }
echo ok
