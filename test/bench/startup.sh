#!/bin/sh
# Start-up cost of the agent in short-lived processes, interleaved, medians
# of STARTUP_BENCH_ROUNDS rounds, CPU time of the children from getrusage
# (system and user apart; wall time on a shared machine says little):
# - /bin/true run STARTUP_BENCH_RUNS times, alone / under the agent;
# - gcc -c of a small file (gcc -> cc1 -> as, each loading the agent);
# - a long-lived process: milliseconds from exec to its first answered
#   request, and the CPU the agent's start-up took (the process sleeps).
#
#   sh test/bench/startup.sh BUILD_DIR  (STARTUP_BENCH_ROUNDS=7, STARTUP_BENCH_RUNS=1000)
set -eu
build=$(cd "${1:-build}" && pwd)
agent="$build/libpprofagent.so"
rounds=${STARTUP_BENCH_ROUNDS:-7}
runs=${STARTUP_BENCH_RUNS:-1000}
work=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
printf 'int f(int x) { return x * 3 + 1; }\n' > "$work/small.c"

python3 - "$agent" "$rounds" "$runs" "$work" <<'PY'
import os, resource, socket, statistics, subprocess, sys, time
agent, rounds, runs, work = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
base = dict(os.environ)
base.pop("LD_PRELOAD", None)
under = dict(base, LD_PRELOAD=agent, PPROF_ADDR="127.0.0.1:0",
             PPROF_RUN_DIR=work + "/run", PPROF_LOG="quiet")

def cpu(argv, env, times):
    """user and system microseconds of `times` runs of argv (children only)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(times):
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) * 1e6 / times,
            (after.ru_stime - before.ru_stime) * 1e6 / times)

def first_request(env):
    """ms from spawn to the first answered request, and the process's CPU ms
    at that moment (it only sleeps: all of it is start-up)."""
    pf = work + "/port"
    if os.path.exists(pf):
        os.unlink(pf)
    e = dict(env, PPROF_PORT_FILE=pf)
    t0 = time.monotonic()
    p = subprocess.Popen(["sleep", "30"], env=e)
    try:
        while not os.path.exists(pf):
            time.sleep(0.002)
        host, port = open(pf).read().rsplit(":", 1)
        s = socket.create_connection((host.strip("[]"), int(port)))
        s.sendall(b"GET /debug/pprof/cmdline HTTP/1.0\r\n\r\n")
        while s.recv(4096):
            pass
        s.close()
        ms = (time.monotonic() - t0) * 1000
        cpu_ns = 0
        for t in os.listdir("/proc/%d/task" % p.pid):
            cpu_ns += int(open("/proc/%d/task/%s/schedstat" % (p.pid, t)).read().split()[0])
        return ms, cpu_ns / 1e6
    finally:
        p.kill()
        p.wait()

res = {k: [] for k in ("true.alone", "true.agent", "gcc.alone", "gcc.agent")}
ready, ready_cpu = [], []
gcc = ["gcc", "-c", "-O2", work + "/small.c", "-o", work + "/small.o"]
for r in range(rounds):
    res["true.alone"].append(cpu(["/bin/true"], base, runs))
    res["true.agent"].append(cpu(["/bin/true"], under, runs))
    res["gcc.alone"].append(cpu(gcc, base, 20))
    res["gcc.agent"].append(cpu(gcc, under, 20))
    ms, c = first_request(under)
    ready.append(ms)
    ready_cpu.append(c)

def med(k, i):
    return statistics.median(v[i] for v in res[k])
print("CPU microseconds per run, median of %d rounds (user / system)" % rounds)
for what, label in (("true", "/bin/true (%d runs a round)" % runs),
                    ("gcc", "gcc -c small.c (20 runs a round)")):
    a_u, a_s = med(what + ".alone", 0), med(what + ".alone", 1)
    g_u, g_s = med(what + ".agent", 0), med(what + ".agent", 1)
    print("%-34s alone %7.0f / %7.0f   agent %7.0f / %7.0f   system x%.2f, user+system x%.2f"
          % (label, a_u, a_s, g_u, g_s, g_s / a_s, (g_u + g_s) / (a_u + a_s)))
print("long-lived process (sleep 30, PPROF_START_DELAY_MS=%s): first request answered "
      "%.0f ms after exec (median), CPU of its live threads then %.1f ms"
      % (os.environ.get("PPROF_START_DELAY_MS", "default"), statistics.median(ready),
         statistics.median(ready_cpu)))
PY
