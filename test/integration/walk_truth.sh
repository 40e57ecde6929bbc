# The table-driven walker against libunwind on real programs: each runs
# under the test-only library build/test/libwalkcheck.so (test/walkcheck/),
# whose SIGPROF handler, on a timer of each thread's CPU time, walks the
# same interrupted context with both and compares them frame for frame.
# Programs as Debian ships them, under real work: redis-server under
# redis-benchmark, nginx (one process) under wrk and a curl loop, python3
# on a CPU- and allocation-heavy script, sqlite3 on heavy queries; and
# test/programs/walk_cxx (C++ exceptions through deep recursion, deep
# templates, -O2 without frame pointers). For each, at least 99.9% of the
# samples compared must be equal, and the figures are printed. Then
# test/programs/walk_jit, whose time goes to generated code in no object
# and with no call-frame information: every sample there must keep its
# leaf, and the program must run to its end.
#
# WALK_TRUTH_SECONDS (default 10) sets the length of each program's work;
# a server is kept under load past it until the harness compared the
# samples judged (its progress file), since a loaded machine gives a server
# few of them a second (redis under redis-benchmark at a load of 22: 130 ms
# of CPU and 7 samples in 5 s).
. "$TOP/test/integration/lib.sh"
. "$TOP/test/integration/services.sh"

CHECK="$BUILD/test/libwalkcheck.so"
[ -f "$CHECK" ] || fail "$CHECK is not built (make test-bins)"
for p in redis-server redis-benchmark redis-cli sqlite3 wrk curl; do
    command -v "$p" >/dev/null 2>&1 || fail "$p is not installed (scripts/install-deps)"
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
PY=/usr/bin/python3
SECS=${WALK_TRUTH_SECONDS:-10}
export WALKCHECK_US=1000
SUMMARY=""

# judge NAME REPORT MIN_SAMPLES: prints the figures, fails below 99.9%.
judge() {
    name=$1; rep=$2; min=$3
    [ -s "$rep" ] || fail "$name: no report written"
    set -- $(head -n 1 "$rep")
    samples=$2; equal=$4; differ=$6; nob=$8
    compared=$((equal + differ))
    pct=$(awk -v e="$equal" -v c="$compared" 'BEGIN { printf "%.3f", c ? 100 * e / c : 0 }')
    line="$name: samples $samples, compared $compared, equal $equal, differing $differ ($pct% equal; $nob without stack bounds)"
    note "$line"
    SUMMARY="$SUMMARY
$line"
    sed -n 2p "$rep" | sed 's/^/#   /'
    if [ "$differ" -gt 0 ]; then
        sed -n '3,80p' "$rep" | sed 's/^/#   /'
    fi
    [ "$compared" -ge "$min" ] || fail "$name: only $compared samples compared (at least $min wanted)"
    awk -v e="$equal" -v c="$compared" 'BEGIN { exit !(e * 1000 >= c * 999) }' \
        || fail "$name: $pct% of stacks equal, below 99.9%"
}

# under_load PROGRESS MIN: returns once SECS have passed and the harness's
# progress file says MIN samples were compared, or after 180 s (a machine
# loaded far beyond the suite's own load; judge then fails by the count).
under_load() {
    _start=$(date +%s)
    while :; do
        _t=$(($(date +%s) - _start))
        [ "$_t" -ge 180 ] && return
        _n=$(awk '{ print $2 }' "$1" 2>/dev/null)
        [ "$_t" -ge "$SECS" ] && [ "${_n:-0}" -ge "$2" ] && return
        sleep 0.2
    done
}

# ---- redis under redis-benchmark -------------------------------------------
port=$(free_port)
WALKCHECK_REPORT="$WORK/redis.rep" WALKCHECK_PROGRESS="$WORK/redis.progress" LD_PRELOAD="$CHECK" redis-server --port "$port" \
    --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" >"$WORK/redis.out" 2>&1 &
RP=$!; PIDS="$PIDS $RP"
for i in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.05; done
redis-benchmark -p "$port" -q -n 100000000 -t set,get,lpush,lpop,incr,sadd,hset,zadd,lrange_100 \
    -P 16 -r 100000 > "$WORK/bench.out" 2>&1 &
B=$!; PIDS="$PIDS $B"
under_load "$WORK/redis.progress" 200
kill "$B" 2>/dev/null; wait "$B" 2>/dev/null || true
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$RP" 2>/dev/null || true
judge redis-server "$WORK/redis.rep" 200

# ---- nginx (one process) under wrk and a curl loop -------------------------
port=$(free_port)
nginx_site 7 100000
nginx_conf "$port" "master_process off;"
WALKCHECK_REPORT="$WORK/nginx.rep" WALKCHECK_PROGRESS="$WORK/nginx.progress" LD_PRELOAD="$CHECK" "$NGINX" -c "$WORK/nginx.conf" \
    -e "$WORK/nginx-error.log" >"$WORK/nginx.out" 2>&1 &
NP=$!; PIDS="$PIDS $NP"
for i in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/page.txt" && break; sleep 0.05; done
curl -s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/page.txt" | gzip -dc | cmp - "$WORK/www/page.txt" \
    || fail "nginx gzip output differs"
wrk -t 1 -c 8 -d 120s -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/page.txt" > "$WORK/wrk.out" 2>&1 &
W=$!; PIDS="$PIDS $W"
while :; do
    curl -s -o /dev/null "http://127.0.0.1:$port/page.txt?$W" || true
    curl -s -o /dev/null "http://127.0.0.1:$port/missing" || true
done &
C=$!; PIDS="$PIDS $C"
under_load "$WORK/nginx.progress" 200
kill "$W" "$C" 2>/dev/null; wait "$W" "$C" 2>/dev/null || true
kill -QUIT "$NP"
wait "$NP" 2>/dev/null || true
judge nginx "$WORK/nginx.rep" 200

# ---- python3 ---------------------------------------------------------------
{
    echo 'import hashlib, json, re, sys, time'
    echo 'from decimal import Decimal'
    py_churn_crunch
    cat <<'PYSRC'
def deep(n):
    return 1 if n == 0 else deep(n - 1) + 1
def text(n):
    doc = json.dumps([{"k": i, "v": str(Decimal(i) / 7)} for i in range(n)])
    words = re.findall(r'"v": "([0-9.]+)"', doc)
    return len(json.loads(doc)), len(sorted(words, key=lambda w: w[::-1]))
def compared():
    try:
        with open(sys.argv[2]) as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
start = time.time()
end = start + float(sys.argv[1])
rounds = 0
while (time.time() < end or compared() < 200) and time.time() < start + 180:
    churn(100000); crunch(150000); deep(300); text(20000); rounds += 1
print("rounds", rounds > 0)
PYSRC
} > "$WORK/work.py"
WALKCHECK_REPORT="$WORK/py.rep" WALKCHECK_PROGRESS="$WORK/py.progress" LD_PRELOAD="$CHECK" \
    $PY "$WORK/work.py" "$SECS" "$WORK/py.progress" > "$WORK/py.out" 2>&1 \
    || { cat "$WORK/py.out" >&2; fail "python3 failed under the harness"; }
grep -q "rounds True" "$WORK/py.out" || fail "python3 output: $(cat "$WORK/py.out")"
judge python3 "$WORK/py.rep" 200

# ---- sqlite3 ---------------------------------------------------------------
cat > "$WORK/q.sql" <<'SQL'
CREATE TABLE t(a INTEGER, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 300000)
  INSERT INTO t SELECT x, printf('%08x', (x * 2654435761) % 4294967296) || (x % 97) FROM c;
CREATE INDEX ta ON t(a);
CREATE INDEX tb ON t(b);
SELECT count(*), sum(a % 13), max(b) FROM t;
SELECT x.a % 50 AS k, count(*), sum(length(x.b)) FROM t x JOIN t y ON y.a = x.a + 1 GROUP BY k ORDER BY k LIMIT 3;
SELECT count(*) FROM t WHERE b LIKE '%ab%' OR b GLOB '*7?';
DELETE FROM t WHERE a % 3 = 0;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 6000000) SELECT sum(x * x % 7), count(*) FROM c;
SQL
WALKCHECK_REPORT="$WORK/sql.rep" LD_PRELOAD="$CHECK" sqlite3 :memory: ".read $WORK/q.sql" > "$WORK/sql.out" 2>&1 \
    || { cat "$WORK/sql.out" >&2; fail "sqlite3 failed under the harness"; }
judge sqlite3 "$WORK/sql.rep" 200

# ---- C++: exceptions, deep templates, -O2 without frame pointers ----------
WALKCHECK_REPORT="$WORK/cxx.rep" WALKCHECK_PROGRESS="$WORK/cxx.progress" LD_PRELOAD="$CHECK" \
    "$BUILD/test/programs/walk_cxx" "$SECS" "$WORK/cxx.progress" 200 \
    > "$WORK/cxx.out" 2>&1 || { cat "$WORK/cxx.out" >&2; fail "walk_cxx failed under the harness"; }
grep -q "walk_cxx done 1" "$WORK/cxx.out" || fail "walk_cxx output: $(cat "$WORK/cxx.out")"
judge walk_cxx "$WORK/cxx.rep" 200

# ---- generated code: the walk ends there, with the leaf --------------------
WALKCHECK_REPORT="$WORK/jit.rep" LD_PRELOAD="$CHECK" "$BUILD/test/programs/walk_jit" 4 1 \
    > "$WORK/jit.out" 2>&1 || { cat "$WORK/jit.out" >&2; fail "walk_jit failed under the harness"; }
grep -q "walk_jit done 1" "$WORK/jit.out" || fail "walk_jit output: $(cat "$WORK/jit.out")"
set -- $(head -n 1 "$WORK/jit.rep")
note "walk_jit: samples $2, in generated code ${10}, leaf kept ${12}; equal to libunwind $4, differing $6"
[ "${10}" -ge 50 ] || fail "walk_jit: only ${10} samples in generated code"
[ "${12}" = "${10}" ] || fail "walk_jit: the leaf was lost in $((${10} - ${12})) samples"

echo "# per program:$SUMMARY"
echo "PASS"
