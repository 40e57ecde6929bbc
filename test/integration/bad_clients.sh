# Hostile clients on the network: malformed requests, absurd numbers,
# many concurrent connections and slow (slowloris) clients. The host keeps
# running and exits as usual, and the server keeps answering the index
# and snapshots within a bounded time throughout.
. "$TOP/test/integration/lib.sh"

start_agent host "$BUILD/test/programs/hostile" masked 40
cat > "$WORK/bad.py" <<'PYSRC'
import random, socket, sys, threading, time
host, port = sys.argv[1].rsplit(":", 1); port = int(port)
rng = random.Random(42)
def raw(data, wait=0.5):
    s = socket.create_connection((host, port), timeout=30)
    try:
        s.sendall(data)
        s.settimeout(wait)
        try:
            return s.recv(4096)
        except OSError:
            return b""
    finally:
        s.close()
def get(path, timeout=15):
    t0 = time.time()
    r = raw(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n\r\n", timeout)
    return r.split(b"\r\n", 1)[0], time.time() - t0
fixed = [
    b"\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"GET /debug/pprof/ HTTP/1.1\r\n",
    b"GARBAGE /debug/pprof/ XYZ\r\n\r\n", b"GET /debug/pprof/\x00 HTTP/1.1\r\n\r\n",
    b"GET /debug/pprof/ HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n0x1",
    b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
    b"POST /debug/pprof/symbol HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n0x1\r\n",
    b"POST /debug/pprof/symbol HTTP/1.1\r\nContent-Length: 10\r\n\r\n0x1",
    b"GET /debug/pprof/heap?seconds=-1&debug=99999999999999999999 HTTP/1.1\r\n\r\n",
    b"GET /debug/pprof/profile?seconds=%ff%fe HTTP/1.1\r\n\r\n",
    b"GET /debug/pprof/threadcreate?debug=-2147483649 HTTP/1.1\r\n\r\n",
    b"GET /debug/pprof/goroutine?debug=2&debug=1&debug=0 HTTP/1.1\r\n\r\n",
    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 2000 + b"\r\n",
    b"GET /debug/pprof/ HTTP/1.1\r\nAuthorization: Basic " + b"A" * 5000 + b"\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(200),  # a TLS hello
]
tried = 0
for d in fixed:
    raw(d); tried += 1
alphabet = b"GETPOS /?&=%+-0123456789xabcdefpprofdebug\r\n:\x00\xff "
for i in range(400):
    n = rng.randint(1, 300)
    d = bytes(rng.choice(alphabet) for _ in range(n))
    if i % 2:
        d = b"GET /debug/pprof/" + d + b" HTTP/1.1\r\n\r\n"
    raw(d, 0.05); tried += 1
status, took = get(b"/debug/pprof/")
assert b"200" in status, status
print("malformed requests tried:", tried)

# Slow clients: each sends a byte of headers every 0.5 s and holds one of
# the two workers until the 5 s header limit: a request waits about
# ceil(slow clients / 2) x 5 s (the pool is fixed, http/server.c).
stop = False
def slow():
    try:
        s = socket.create_connection((host, port), timeout=30)
        s.sendall(b"GET /debug/pprof/ HTTP/1.1\r\n")
        while not stop:
            s.sendall(b"X")
            time.sleep(0.5)
    except OSError:
        pass
slows = [threading.Thread(target=slow, daemon=True) for _ in range(6)]
for t in slows: t.start()
time.sleep(1)
worst = 0
for i in range(10):
    status, took = get(b"/debug/pprof/threadcreate?debug=1", 120)
    assert b"200" in status, status
    worst = max(worst, took)
print("with 6 slow clients: 10 requests answered, slowest %.1f s" % worst)
stop = True

# A flood of concurrent connections.
ok = [0]
def flood():
    for _ in range(5):
        try:
            st, _ = get(b"/debug/pprof/cmdline", 30)
            if b"200" in st or b"503" in st:
                ok[0] += 1
        except OSError:
            pass
fl = [threading.Thread(target=flood) for _ in range(100)]
for t in fl: t.start()
for t in fl: t.join()
print("flood: %d of 500 requests answered" % ok[0])
assert ok[0] >= 400, ok[0]
status, took = get(b"/debug/pprof/")
assert b"200" in status, status
PYSRC
python3 "$WORK/bad.py" "$ADDR"
for i in $(seq 30); do [ "$(http_status debug/pprof/)" = 200 ] && break; sleep 0.5; done
[ "$(http_status debug/pprof/)" = 200 ] || fail "the server stopped answering"
kill -0 "$PID" || fail "the host died"
c=$(curl -s -o /dev/null -w '%{http_code}' "http://$ADDR/debug/pprof/profile?seconds=1")
[ "$c" = 200 ] || fail "CPU profile after the abuse: $c"
stop "$PID"
echo ok
