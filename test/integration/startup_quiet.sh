# Short-lived processes under the agent stay quiet and cheap: a wrapper
# chain that execs the real program prints exactly one line (the
# program's, with its URL), a script's quick commands print nothing and
# leave nothing in the run directory, and the port file names the program.
. "$TOP/test/integration/lib.sh"

B="$BUILD/test/programs/batch_job"
# Wrappers that exec at once (as pyenv shims do), then the real program.
env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$WORK/chain.port" \
    sh -c "exec env sh -c 'exec nice -n 0 $B wait 0 3'" >"$WORK/chain.out" 2>"$WORK/chain.err" &
chain=$!
PIDS="$PIDS $chain"
i=0
while [ ! -s "$WORK/chain.port" ]; do
    i=$((i + 1)); [ $i -lt 100 ] || { cat "$WORK/chain.err"; fail "no port file from the wrapper chain"; }
    sleep 0.05
done
addr=$(cat "$WORK/chain.port")
wait "$chain" || fail "the wrapper chain failed"
cat "$WORK/chain.err"
[ "$(cat "$WORK/chain.out")" = done ] || fail "the program's output changed"
[ "$(grep -c '^pprofagent:' "$WORK/chain.err")" = 1 ] || fail "the wrapper chain printed $(grep -c '^pprofagent:' "$WORK/chain.err") agent lines, want 1"
grep -qx "pprofagent: serving http://$addr/debug/pprof/ (pid $chain)" "$WORK/chain.err" ||
    fail "the line does not name the port file's address and the program's pid"

# A script whose commands end at once: no line, no server, no file.
env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 \
    sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; env true; done; echo finished' \
    >"$WORK/script.out" 2>"$WORK/script.err"
[ "$(cat "$WORK/script.out")" = finished ] || fail "the script's output changed"
[ ! -s "$WORK/script.err" ] || { cat "$WORK/script.err"; fail "short-lived commands printed agent lines"; }
[ -z "$(ls "$PPROF_RUN_DIR" 2>/dev/null)" ] || { ls -l "$PPROF_RUN_DIR"; fail "short-lived commands left announcement files"; }
echo ok
