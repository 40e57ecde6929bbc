# Programs nobody here wrote, as Debian ships them, under the agent on
# loopback and under load: redis-server with redis-benchmark, memcached
# with a pipelined client, sqlite3 on a heavy query, python3 on a CPU- and
# allocation-heavy script, varnishd (which exports its own zlib), nginx
# (master and workers) under wrk. For each:
# output and exit status are those of the run without the agent; a CPU
# profile taken under load names the program's own hot functions (Debian
# strips its binaries: the names come from their dynamic symbol tables and
# from the shared libraries they use); the heap profile is non-empty and
# parses. Redis idle: its main thread waits in epoll_wait under aeMain in
# goroutine?debug=2 and in the wall profile.
. "$TOP/test/integration/lib.sh"
. "$TOP/test/integration/services.sh"

for p in redis-server redis-benchmark redis-cli memcached sqlite3 wrk; do
    command -v "$p" >/dev/null 2>&1 || fail "$p is not installed (scripts/install-deps)"
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
PY=/usr/bin/python3
# names TOP_TEXT MIN NAME...: at least MIN of the names appear.
names() {
    text=$1; min=$2; shift 2; found=""
    for n in "$@"; do case "$text" in *"$n"*) found="$found $n";; esac; done
    note "names found:$found"
    [ "$(echo $found | wc -w)" -ge "$min" ] || { echo "$text" | head -n 25; fail "fewer than $min of: $*"; }
}
heap_ok() { # FILE: parses, in-use or allocated space > 0
    t=$(pprof -top -sample_index=alloc_space "$1")
    echo "$t" | sed -n 's/^Showing nodes accounting for .*of \(.*\) total.*/alloc_space total \1/p'
    echo "$t" | grep -q 'of 0 total' && fail "$1: empty heap profile"
    echo "$t" | grep -q '% of ' || fail "$1: no heap samples"
}
export PPROF_HEAP_RATE=65536

# ---- redis ------------------------------------------------------------------
redis_script() { # PORT: a fixed command sequence, its answers on stdout
    for i in $(seq 50); do echo "SET key:$i value-$((i * i))"; done
    echo "INCRBY counter 41"; echo "INCR counter"; echo "LPUSH l a b c"; echo "LRANGE l 0 -1"
    for i in 1 17 50; do echo "GET key:$i"; done
}
run_redis() { # NAME AGENT(0/1): output in $WORK/NAME.answers
    port=$(free_port)
    if [ "$2" = 1 ]; then
        start_agent "$1" redis-server --port "$port" --bind 127.0.0.1 --save '' \
            --appendonly no --dir "$WORK"
    else
        redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
            --dir "$WORK" >"$WORK/$1.out" 2>&1 &
        PID=$!; PIDS="$PIDS $PID"
    fi
    for i in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
    redis_script | redis-cli -p "$port" > "$WORK/$1.answers"
    if [ "$2" = 1 ]; then
        timeout 30 redis-benchmark -p "$port" -q -n 3000000 -t set,get,lpush,incr -P 16 \
            > "$WORK/bench.out" 2>&1 &
        B=$!
        sleep 0.5
        fetch 'debug/pprof/profile?seconds=3' > "$WORK/redis.pb.gz"
        fetch debug/pprof/heap > "$WORK/redis-heap.pb.gz"
        kill "$B" 2>/dev/null || true; wait "$B" 2>/dev/null || true
        # Idle again: the main thread waits in epoll_wait under aeMain, in
        # the threads dump and in the wall profile.
        sleep 0.3
        fetch 'debug/pprof/goroutine?debug=2' > "$WORK/redis.threads"
        fetch 'debug/pprof/wall?seconds=2' > "$WORK/redis-wall.pb.gz"
    fi
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    if wait "$PID"; then st=0; else st=$?; fi
    echo "$st" > "$WORK/$1.status"
}
run_redis redis-plain 0
run_redis redis-agent 1
cmp "$WORK/redis-plain.answers" "$WORK/redis-agent.answers" || fail "redis answers changed"
[ "$(cat "$WORK/redis-plain.status")" = "$(cat "$WORK/redis-agent.status")" ] || fail "redis exit status changed"
names "$(pprof -top -nodecount=40 "$WORK/redis.pb.gz")" 3 \
    dictFind call processCommand lookupKey zmalloc _addReplyToBufferOrList \
    readQueryFromClient processInputBuffer dictAdd setGenericCommand aeProcessEvents
heap_ok "$WORK/redis-heap.pb.gz"
# (aeProcessEvents itself is a local clone in Debian's stripped binary: it
# shows as redis-server+0xSTART, its start in the unwind tables.)
main=$(awk '/^goroutine .*thread "redis-server"\]:/ {p = 1} /^$/ {p = 0} p' "$WORK/redis.threads")
expect_contains "$main" "epoll_wait" "redis's main thread in the threads dump"
expect_contains "$main" "aeMain" "redis's main thread in the threads dump"
wall=$(pprof -traces -tagfocus=thread=redis-server "$WORK/redis-wall.pb.gz")
expect_contains "$wall" "syscall:  epoll_wait" "redis's main thread in the wall profile"
expect_contains "$wall" "aeMain" "redis's main thread in the wall profile"

# ---- memcached --------------------------------------------------------------
cat > "$WORK/mc.py" <<'PYSRC'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
f = s.makefile("rb")
out = []
for i in range(int(sys.argv[2])):
    v = ("v%d" % (i * 7919)).encode() * 20
    s.sendall(b"set k%d 0 0 %d\r\n%s\r\n" % (i % 5000, len(v), v))
    out.append(f.readline().strip())
    s.sendall(b"get k%d\r\n" % (i % 5000))
    line = f.readline()
    if line.startswith(b"VALUE"):
        n = int(line.split()[3]); data = f.read(n + 2); f.readline(); out.append(data[:-2])
    else:
        out.append(line)
import hashlib
print(len(out), hashlib.sha1(b"|".join(out)).hexdigest())
PYSRC
user=""; [ "$(id -u)" = 0 ] && user="-u nobody"
# The same client against a plain memcached and, at the same time, one
# under the agent (each its own port and answers file).
pport=$(free_port)
memcached -l 127.0.0.1 -p "$pport" -U 0 -t 2 -m 64 $user > "$WORK/mc-plain.log" 2>&1 &
M=$!; PIDS="$PIDS $M"
port=$(free_port)
start_agent mc memcached -l 127.0.0.1 -p "$port" -U 0 -t 2 -m 64 $user
listens() { bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
wait_until "the plain memcached to listen" listens "$pport"
wait_until "memcached under the agent to listen" listens "$port"
$PY "$WORK/mc.py" "$pport" 20000 > "$WORK/mc-plain.answers" &
MC=$!
$PY "$WORK/mc.py" "$port" 20000 > "$WORK/mc-agent.answers"
wait "$MC" || fail "the client of the plain memcached failed"
kill "$M"; wait "$M" 2>/dev/null || true
cmp "$WORK/mc-plain.answers" "$WORK/mc-agent.answers" || fail "memcached answers changed"
LOAD=""
for j in 1 2 3; do $PY "$WORK/mc.py" "$port" 200000 > /dev/null & LOAD="$LOAD $!"; done
sleep 0.3
fetch 'debug/pprof/profile?seconds=3' > "$WORK/mc.pb.gz"
fetch debug/pprof/heap > "$WORK/mc-heap.pb.gz"
for p in $LOAD; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
names "$(pprof -top -nodecount=40 "$WORK/mc.pb.gz")" 2 \
    process_command drive_machine try_read_command item_get do_item_get assoc_find \
    hash process_update_command complete_nread event_base_loop conn_ libevent \
    __libc_recv __libc_sendmsg sendmsg recv
heap_ok "$WORK/mc-heap.pb.gz"
kill -0 "$PID" || fail "memcached died"
stop "$PID"

# same_under_agent NAME WHAT PAUSE CMD...: runs CMD alone and, at the same
# time (two cores; neither shares a file with the other), under the agent
# as NAME, taking a 2 s CPU profile ($WORK/NAME.pb.gz) and a heap profile
# ($WORK/NAME-heap.pb.gz) after PAUSE seconds; WHAT's exit status and
# output must be the same as without the agent.
same_under_agent() {
    name=$1 what=$2 pause=$3
    shift 3
    "$@" > "$WORK/$name-plain.out" 2>&1 &
    alone=$!
    PIDS="$PIDS $alone"
    start_agent "$name" "$@"
    sleep "$pause"
    fetch 'debug/pprof/profile?seconds=2' > "$WORK/$name.pb.gz"
    fetch debug/pprof/heap > "$WORK/$name-heap.pb.gz"
    # A program that runs until told (python3's work) stops now.
    : > "$WORK/$name.stop"
    if wait "$PID"; then agent=0; else agent=$?; fi
    if wait "$alone"; then plain=0; else plain=$?; fi
    [ "$agent" = "$plain" ] || fail "$what status $agent, expected $plain"
    cmp "$WORK/$name-plain.out" "$WORK/$name.out" || fail "$what output changed"
}

# ---- sqlite3 ----------------------------------------------------------------
cat > "$WORK/q.sql" <<'SQL'
CREATE TABLE t(a INTEGER, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 300000)
  INSERT INTO t SELECT x, printf('%08x', (x * 2654435761) % 4294967296) || (x % 97) FROM c;
CREATE INDEX ta ON t(a);
SELECT count(*), sum(a % 13), max(b) FROM t;
SELECT x.a % 50 AS k, count(*), sum(length(x.b)) FROM t x JOIN t y ON y.a = x.a + 1 GROUP BY k ORDER BY k LIMIT 3;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 40000000) SELECT sum(x * x % 7), count(*) FROM c;
SQL
same_under_agent sql sqlite3 0.3 sqlite3 :memory: ".read $WORK/q.sql"
names "$(pprof -top -nodecount=40 "$WORK/sql.pb.gz")" 1 \
    sqlite3VdbeExec sqlite3BtreeInsert sqlite3BtreeDelete sqlite3VdbeMemMakeWriteable sqlite3_step
heap_ok "$WORK/sql-heap.pb.gz"

# ---- python3 ----------------------------------------------------------------
{
    echo 'import hashlib, os, time'
    echo "stop = '$WORK/py.stop'"
    py_churn_crunch
    cat <<'PYSRC'
end = time.time() + 120
rounds = 0
while time.time() < end and (rounds == 0 or not os.path.exists(stop)):
    churn(200000); crunch(300000); rounds += 1
print(churn(300000), crunch(1000000), rounds > 0)
PYSRC
} > "$WORK/work.py"
same_under_agent py python3 0.5 $PY "$WORK/work.py"
names "$(pprof -top -nodecount=40 "$WORK/py.pb.gz")" 2 \
    _PyEval_EvalFrameDefault PyObject_Malloc _PyObject_Malloc long_ PyLong_ dict_ \
    list_ PyUnicode_ _PyObject_ insertdict
heap_ok "$WORK/py-heap.pb.gz"

# ---- varnish ----------------------------------------------------------------
# varnishd exports its own zlib (deflate, deflateInit2_, inflate, ...): the
# agent's compression must use its own (before, every protobuf profile
# answered 500). Same page through the cache with and without the agent;
# under it, a CPU and a heap profile answer 200 and decode; no varnish
# process is left after it stops.
VARNISHD=$(command -v varnishd || echo /usr/sbin/varnishd)
[ -x "$VARNISHD" ] || fail "varnishd is not installed (scripts/install-deps)"
mkdir -p "$WORK/vbe"
seq 1 2000 > "$WORK/vbe/page.txt"
bport=$(free_port)
$PY -m http.server "$bport" --bind 127.0.0.1 --directory "$WORK/vbe" > /dev/null 2>&1 &
PIDS="$PIDS $!"
# varnish_page PORT OUT: the page through the cache, once it answers.
varnish_page() {
    for i in $(seq 200); do
        curl -s -f -o "$2" "http://127.0.0.1:$1/page.txt" && return 0
        sleep 0.05
    done
    fail "varnish on port $1 never served the page"
}
# -j none: no privilege separation (the test's folder is its user's only).
vport=$(free_port)
"$VARNISHD" -F -j none -a "127.0.0.1:$vport" -b "127.0.0.1:$bport" -n "$WORK/vn-plain" \
    -s malloc,32m > "$WORK/varnish-plain.out" 2>&1 &
VP=$!
PIDS="$PIDS $VP"
varnish_page "$vport" "$WORK/varnish-plain.page"
stop "$VP"
vport=$(free_port)
start_agent varnish "$VARNISHD" -F -j none -a "127.0.0.1:$vport" -b "127.0.0.1:$bport" \
    -n "$WORK/vn-agent" -s malloc,32m
varnish_page "$vport" "$WORK/varnish-agent.page"
cmp "$WORK/varnish-plain.page" "$WORK/varnish-agent.page" || fail "varnish served different bytes under the agent"
code=$(curl -s -o "$WORK/varnish.pb.gz" -w '%{http_code}' --max-time 60 "http://$ADDR/debug/pprof/profile?seconds=1")
[ "$code" = 200 ] || fail "varnishd's CPU profile answered $code: $(head -c 200 "$WORK/varnish.pb.gz")"
pprof -raw "$WORK/varnish.pb.gz" > /dev/null
code=$(curl -s -o "$WORK/varnish-heap.pb.gz" -w '%{http_code}' --max-time 60 "http://$ADDR/debug/pprof/heap")
[ "$code" = 200 ] || fail "varnishd's heap profile answered $code"
pprof -raw "$WORK/varnish-heap.pb.gz" > /dev/null
note "varnishd: page identical, CPU and heap profiles 200 and decode"
stop "$PID"
for i in $(seq 100); do
    pgrep -f "$WORK/vn-" > /dev/null || break
    sleep 0.1
done
pgrep -fa "$WORK/vn-" && fail "varnish processes left behind"

# ---- nginx under wrk --------------------------------------------------------
port=$(free_port)
nginx_site 7 100000
nginx_conf "$port" "master_process on; worker_processes 2;"
start_agent nginx "$NGINX" -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log"
for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/page.txt" && break; sleep 0.05; done
curl -s "http://127.0.0.1:$port/page.txt" | cmp - "$WORK/www/page.txt" || fail "nginx served different bytes"
curl -s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/page.txt" | gzip -dc | cmp - "$WORK/www/page.txt" \
    || fail "nginx gzip output differs"
wrk -t 2 -c 16 -d 4s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/page.txt" > "$WORK/wrk.out" 2>&1 &
W=$!
sleep 0.5
fetch debug/pprof/heap > "$WORK/nginx-heap.pb.gz"
# The workers are forked children: each serves its own endpoints when
# PPROF_RUN_DIR announces them (ops_nginx_workers.sh); here the master's
# process list is read when present.
procs=$(fetch debug/pprof/processes 2>/dev/null || true)
waddr=$(printf '%s\n' "$procs" | grep -o '127\.0\.0\.1:[0-9]*' | grep -v "^$ADDR\$" | head -n 1 || true)
wait "$W"
cat "$WORK/wrk.out"
grep -q 'Requests/sec' "$WORK/wrk.out" || fail "wrk did not run"
grep -q -e 'Non-2xx' -e 'Socket errors' "$WORK/wrk.out" && fail "wrk saw errors under the agent"
heap_ok "$WORK/nginx-heap.pb.gz"
if [ -n "$waddr" ]; then
    wrk -t 2 -c 16 -d 4s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/page.txt" > /dev/null 2>&1 &
    W=$!
    sleep 0.3
    curl -s -o "$WORK/ngx-worker.pb.gz" --max-time 30 "http://$waddr/debug/pprof/profile?seconds=2"
    wait "$W"
    names "$(pprof -top -nodecount=40 "$WORK/ngx-worker.pb.gz")" 2 \
        ngx_ deflate gzip longest_match compress_block sendfile writev __libc_writev epoll_wait
else
    note "no worker endpoint listed: worker CPU profiles are ops_nginx_workers.sh's"
fi
kill -QUIT "$PID"
if wait "$PID"; then st=0; else st=$?; fi
[ "$st" = 0 ] || fail "nginx exited with $st after QUIT"
echo ok
