# A wrapper under the agent that lives past the start delay (a pyenv shim's
# bash on a loaded machine) serves and writes PPROF_PORT_FILE, then execs
# the real program: its server ends with the exec. The port file must not
# keep naming it: once the real program runs, the file is absent or names
# an address that answers, and the program's own server starts without a
# second delay (the process already lived it). Then Python's http.server
# and multiprocessing under the agent: both ports answer once the port file
# is written, and the spawn start method leaves no process behind.
. "$TOP/test/integration/lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: no $PY"; exit 0; }

# The wrapper waits for its child (which fires the start), serves after
# the delay, then execs Python, which prints one line from its main.
pf="$WORK/wrap.port"
env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$pf" \
    sh -c "while [ ! -e '$WORK/go' ]; do sleep 0.05; done; exec $PY -c 'import time; print(\"started\", flush=True); time.sleep(60)'" \
    >"$WORK/wrap.out" 2>"$WORK/wrap.err" &
wrap=$!
PIDS="$PIDS $wrap"
wait_until "the wrapper's port file" test -s "$pf"
first=$(cat "$pf")
curl -sf -m 5 -o /dev/null "http://$first/debug/pprof/" || fail "the wrapper's server does not answer"
touch "$WORK/go"
wait_until "the program's main" grep -q started "$WORK/wrap.out"
# Python's main ran, so did the agent's constructor of its image: from here
# the file is never the wrapper's address while that address refuses.
if [ -s "$pf" ]; then
    now=$(cat "$pf")
    curl -s -m 5 -o /dev/null "http://$now/debug/pprof/" ||
        fail "the port file names $now, which refuses (the wrapper's was $first)"
fi
wait_until "the program's port file" test -s "$pf"
now=$(cat "$pf")
curl -sf -m 5 -o /dev/null "http://$now/debug/pprof/" || fail "the program's server does not answer"
got=$(curl -sf -m 5 "http://$now/debug/pprof/cmdline" | tr '\0' ' ')
expect_contains "$got" "$PY -c" "the server of the port file is Python's"
kill "$wrap"

# http.server: once the port file is written, both ports answer at once.
runs=${EXEC_PORT_RUNS:-10}
i=0
while [ $i -lt $runs ]; do
    i=$((i + 1))
    pf="$WORK/http$i.port"
    rm -f "$WORK/http.ready"
    env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$pf" \
        $PY -c 'import http.server, socketserver, sys
s = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
open(sys.argv[1] + ".tmp", "w").write(str(s.server_address[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.serve_forever()' "$WORK/http.ready" >"$WORK/http.out" 2>"$WORK/http.err" &
    hp=$!
    PIDS="$PIDS $hp"
    wait_until "http.server's port file, run $i" test -s "$pf"
    addr=$(cat "$pf")
    curl -sf -m 5 -o /dev/null "http://$addr/debug/pprof/" ||
        fail "run $i: the agent's port $addr refused just after the port file was written"
    wait_until "http.server's port, run $i" test -s "$WORK/http.ready"
    curl -sf -m 5 -o /dev/null "http://127.0.0.1:$(cat "$WORK/http.ready")/" ||
        fail "run $i: http.server refused"
    kill "$hp"; wait "$hp" 2>/dev/null || true
done

# multiprocessing with the spawn start method (a resource tracker and
# spawned children, each exec'd): nothing is left once the parent returns.
cat >"$WORK/mp.py" <<'PYEOF'
import multiprocessing as mp, sys, time
from multiprocessing import shared_memory
def square(x):
    time.sleep(0.4)  # the parent lives past the start delay: it serves
    return x * x
if __name__ == "__main__":
    mp.set_start_method(sys.argv[1])
    with mp.Pool(2) as p:
        print(p.map(square, range(8)), flush=True)
    s = shared_memory.SharedMemory(create=True, size=4096); s.close(); s.unlink()
PYEOF
for method in spawn forkserver fork; do
    out=$(python3 "$TOP/test/integration/leftovers.py" --wait 10 \
        LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_PORT_FILE="$WORK/mp.port" \
        $PY "$WORK/mp.py" $method 2>"$WORK/mp.err") || fail "multiprocessing $method: $out $(cat "$WORK/mp.err")"
    [ "$out" = "[0, 1, 4, 9, 16, 25, 36, 49]" ] || fail "multiprocessing $method printed: $out"
done
echo ok
