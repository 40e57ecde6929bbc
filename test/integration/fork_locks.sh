# A forking server under the agent forks as safely as without it: no child
# inherits a C library lock held by one of the agent's threads (the
# loader's, the time zone's, the resolver's; agent/core/loader.c and
# docs/fork.md). A single-threaded program forks thousands of children, each
# of which takes those locks and exits, while the agent's threads start the
# server, take CPU and wall profiles (which rebuild the unwind tables and
# the program-header snapshot), dump threads and symbolize: zero children
# stuck. Then PostgreSQL under pgbench -C (a forked backend per
# transaction) while CPU profiles are taken: pgbench ends, the server
# shuts down.
. "$TOP/test/integration/lib.sh"
. "$TOP/test/integration/services.sh"

# The agent's work beside the forks, until the program ends: profiles,
# threads dumps, symbolization, the index.
agent_work() {
    while kill -0 "$1" 2>/dev/null; do
        fetch 'debug/pprof/profile?seconds=1' -o /dev/null || true
        fetch 'debug/pprof/wall?seconds=1' -o /dev/null || true
        fetch 'debug/pprof/goroutine?debug=2' -o /dev/null || true
        fetch 'debug/pprof/symbol' -d '0x401000' -o /dev/null || true
        fetch 'debug/pprof/' -o /dev/null || true
    done
}

export PPROF_START_DELAY_MS=50
# 150 s, and on until 1,000 forks where a loaded machine forks slower (795
# in 150 s at a load of 23; 3,079 on a quiet machine).
start_agent storm "$BUILD/test/programs/fork_storm" 150 6000 1000
agent_work "$PID" &
worker=$!
wait_exit "$PID" 650
wait "$worker" 2>/dev/null || true
line=$(grep '^forks ' "$WORK/storm.out") || fail "no summary: $(cat "$WORK/storm.out")"
note "$line"
grep '^child .* stuck' "$WORK/storm.out" && fail "children stuck on a lock held at fork: $line"
[ "$STATUS" = 0 ] || fail "fork_storm exited $STATUS: $line"
forks=$(echo "$line" | cut -d' ' -f2)
[ "$forks" -ge 1000 ] || fail "only $forks forks: too few to tell"
unset PPROF_START_DELAY_MS

# PostgreSQL under pgbench -C.
pg_find || fail "PostgreSQL, pgbench or the postgres user is missing (scripts/install-deps installs them)"
pg="$WORK/pg"
chmod 755 "$WORK"
pg_initdb "$pg" || { tail "$pg/initdb.log"; fail "initdb"; }
pgport=$(free_port)
portfile="$pg/agent.port"
# The postmaster itself in the background (setpriv execs it): its pid is PG.
in_background() { "$@" > "$WORK/pg.out" 2>&1 & PG=$!; }
pg_postmaster in_background "$pg" "$pgport" \
    "LD_PRELOAD=$AGENT PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE=$portfile PPROF_RUN_DIR=$pg/run"
PIDS="$PIDS $PG"
wait_until "the postmaster's agent serves" test -s "$portfile"
ADDR=$(cat "$portfile")
wait_until "postgres accepts" "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$pgport"
pg_fill "$pgport" "$WORK/pgbench-init.log" ||
    { tail "$WORK/pgbench-init.log"; fail "pgbench -i"; }
agent_work "$PG" &
worker=$!
timeout 300 pgbench -C -c 2 -j 2 -T 30 -h 127.0.0.1 -p "$pgport" -U postgres postgres \
    > "$WORK/pgbench.log" 2>&1 || { tail "$WORK/pgbench.log"; fail "pgbench -C did not finish (status $?)"; }
grep -E 'number of transactions actually processed|tps' "$WORK/pgbench.log" | sed 's/^/# /'
grep -q 'number of failed transactions: 0' "$WORK/pgbench.log" ||
    grep -q 'number of transactions actually processed: [1-9]' "$WORK/pgbench.log" ||
    fail "pgbench processed nothing: $(tail -n 5 "$WORK/pgbench.log")"
expect_contains "$(fetch debug/stats)" '"forks_not_gated": 0' "the postmaster's /debug/stats"
$PG_AS "$PGBIN/pg_ctl" -D "$pg/data" -m fast -w -t 60 stop > "$WORK/pgstop.log" 2>&1 ||
    { cat "$WORK/pgstop.log"; fail "postgres did not shut down"; }
wait "$PG" 2>/dev/null || true
kill "$worker" 2>/dev/null || true
wait "$worker" 2>/dev/null || true
echo ok
