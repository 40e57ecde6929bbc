# Sourced by services.sh: the three services, each as setup_S (once; on
# failure the reason in $work/why), start_S ENV (through launch, with ENV
# the variables of a configuration; waits until it answers), load_S SECS
# (prints the requests completed, every one checked; on failure the reason
# in $work/why) and stop_S. BACKENDS_S is how many processes the load adds
# (forked per connection) before profiles are asked of them; a service
# whose load forks them has count_S T0 T1 as well (the requests completed
# between two times in ns) and its window lies inside a longer load.

# free_port, nginx's site and configuration, the PostgreSQL cluster: as the
# integration tests set them up.
. "$top/test/integration/services.sh"

# until_ok SECS CMD...: runs CMD every 0.1 s until it succeeds; fails
# after SECS.
until_ok() {
    n=$(($1 * 10)); shift
    until "$@" >/dev/null 2>&1; do
        n=$((n - 1)); [ $n -gt 0 ] || return 1
        sleep 0.1
    done
}

# ---- redis-server under redis-benchmark (20 clients, GET and SET) ----------
BACKENDS_redis=0
setup_redis() {
    command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
        { echo "redis-server or redis-benchmark missing (scripts/install-deps)" >"$work/why"; return 1; }
}
start_redis() {
    RPORT=$(free_port)
    # shellcheck disable=SC2086
    launch env $1 redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no
    until_ok 20 redis-cli -p "$RPORT" ping || { echo "redis did not answer" >"$work/why"; return 1; }
}
# Batches of 10,000 GET and 10,000 SET until SECS have passed.
# At least one batch, however late the loop starts (on a loaded machine the
# window's end could pass before the first one, leaving a window with no
# request).
load_redis() {
    end=$(($(date +%s%N) + $1 * 1000000000))
    n=0
    while :; do
        redis-benchmark -p "$RPORT" -c 20 -n 10000 -t get,set --csv >"$work/rb.out" 2>&1 || true
        [ "$(grep -c '^"\(GET\|SET\)","[0-9]' "$work/rb.out")" = 2 ] && ! grep -qi error "$work/rb.out" || {
            echo "redis-benchmark failed: $(tr '\n' ' ' <"$work/rb.out" | cut -c1-200)" >"$work/why"; return 1; }
        n=$((n + 20000))
        [ "$(date +%s%N)" -lt "$end" ] || break
    done
    echo $n
}
stop_redis() { kill "$SVC" 2>/dev/null || true; wait "$SVC" 2>/dev/null || true; }

# ---- nginx, a master and 1 worker, under wrk (8 connections) ----------------
BACKENDS_nginx=0
setup_nginx() {
    NGINX=$(command -v nginx || echo /usr/sbin/nginx)
    [ -x "$NGINX" ] && command -v wrk >/dev/null ||
        { echo "nginx or wrk missing (scripts/install-deps)" >"$work/why"; return 1; }
    WORK="$work/nginx"
    mkdir -p "$WORK"
    nginx_site 1 4096
}
start_nginx() {
    WORK="$work/nginx"
    NPORT=$(free_port)
    nginx_conf "$NPORT" "master_process on; worker_processes 1;"
    # shellcheck disable=SC2086
    launch env $1 "$NGINX" -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log"
    until_ok 20 curl -fs -o /dev/null "http://127.0.0.1:$NPORT/page.txt" ||
        { echo "nginx did not answer: $(tail -n 2 "$WORK/nginx-error.log")" >"$work/why"; return 1; }
}
load_nginx() {
    wrk -t 1 -c 8 -d "${1}s" "http://127.0.0.1:$NPORT/page.txt" >"$work/wrk.out" 2>&1 &&
        ! grep -q 'Socket errors\|Non-2xx' "$work/wrk.out" &&
        awk '/requests in/ { print $1; ok = 1 } END { exit !ok }' "$work/wrk.out" ||
        { echo "wrk failed: $(tr '\n' ' ' <"$work/wrk.out" | cut -c1-300)" >"$work/why"; return 1; }
}
stop_nginx() { kill "$SVC" 2>/dev/null || true; wait "$SVC" 2>/dev/null || true; }

# ---- PostgreSQL under pgbench (select-only, 2 clients) ----------------------
# Select-only and no autovacuum: the CPU a transaction costs does not
# drift as tables grow (TPC-B-like read 540 and 1,150 CPU s per million
# transactions in two runs without the agent).
# Each client's backend is forked by the postmaster as it connects.
BACKENDS_postgres=2
setup_postgres() {
    pg_find || { echo "PostgreSQL, pgbench or the postgres user missing (scripts/install-deps)" >"$work/why"; return 1; }
    pg_initdb "$work/pg" || { echo "initdb failed: $(tail -n 2 "$work/pg/initdb.log")" >"$work/why"; return 1; }
    start_postgres "" && pg_fill "$PGPORT" "$work/pgi.log" ||
        { echo "pgbench -i failed: $(tail -n 2 "$work/pgi.log")" >"$work/why"; stop_postgres; return 1; }
    stop_postgres
}
start_postgres() {
    PGPORT=$(free_port)
    pg_postmaster launch "$work/pg" "$PGPORT" "$1" -c fsync=off -c autovacuum=off
    until_ok 30 "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" ||
        { echo "postgres did not answer" >"$work/why"; return 1; }
}
load_postgres() {
    rm -f "$work"/pgl.*
    pgbench -n -S -c 2 -j 1 -T "$1" -l --log-prefix="$work/pgl" -h 127.0.0.1 -p "$PGPORT" -U postgres postgres >"$work/pgb.out" 2>&1 &&
        grep -q '^number of failed transactions: 0 ' "$work/pgb.out" &&
        awk -F': ' '/^number of transactions actually processed/ { print $2; ok = $2 > 0 } END { exit !ok }' "$work/pgb.out" ||
        { echo "pgbench failed: $(tr '\n' ' ' <"$work/pgb.out" | cut -c1-300)" >"$work/why"; return 1; }
}
# Transactions whose end (pgbench's log: time_epoch, time_us) falls
# between T0 and T1.
count_postgres() {
    cat "$work"/pgl.* | awk -v a="$1" -v b="$2" '{ t = ($5 * 1e6 + $6) * 1000 }
        t >= a + 0 && t < b + 0 { n++ } END { print n + 0 }'
}
stop_postgres() {
    kill -INT "$SVC" 2>/dev/null || true # fast shutdown
    wait "$SVC" 2>/dev/null || true
}
