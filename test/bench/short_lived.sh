#!/bin/sh
# Short-lived processes: `make -j2` of MAKE_BENCH_TARGETS tiny targets (each
# one exec of touch), run side by side with no preload, under the
# forwarding-only shim (test/bench/forward_shim.c: what any preload costs)
# and under the agent (the settings given to make, as a user would run a
# build under it). Interleaved rounds; per round the children's CPU
# (user + system, getrusage) and the wall time; the agent's ratios to the
# shim with their spread (min-max over the rounds). The target is the
# agent within 10% of the shim.
#
#   sh test/bench/short_lived.sh BUILD_DIR  (MAKE_BENCH_ROUNDS=5, MAKE_BENCH_TARGETS=1200)
set -eu
build=$(cd "${1:-build}" && pwd)
agent="$build/libpprofagent.so"
shim="$build/test/bench/libforward_shim.so"
rounds=${MAKE_BENCH_ROUNDS:-5}
targets=${MAKE_BENCH_TARGETS:-1200}
[ -f "$agent" ] && [ -f "$shim" ] || { echo "short_lived: $agent or $shim missing" >&2; exit 1; }
command -v make >/dev/null || { echo "short_lived: no make" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

python3 - "$agent" "$shim" "$rounds" "$targets" "$work" <<'PY'
import os, resource, shutil, statistics, subprocess, sys, time
agent, shim, rounds, targets, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
with open(work + "/Makefile", "w") as f:
    names = " ".join("t%d" % i for i in range(targets))
    f.write("all: %s\n" % names)
    f.write("t%:\n\ttouch $@\n")
base = dict(os.environ)
base.pop("LD_PRELOAD", None)
base.pop("MAKEFLAGS", None)
base.pop("MFLAGS", None)
kinds = {
    "none": base,
    "shim": dict(base, LD_PRELOAD=shim),
    "agent": dict(base, LD_PRELOAD=agent, PPROF_ADDR="127.0.0.1:0",
                  PPROF_RUN_DIR=work + "/run", PPROF_LOG="quiet"),
}

def run(env):
    d = work + "/out"
    shutil.rmtree(d, ignore_errors=True)
    os.mkdir(d)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(["make", "-s", "-j2", "-f", work + "/Makefile", "-C", d],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    a = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (a.ru_utime - b.ru_utime) + (a.ru_stime - b.ru_stime), wall

res = {k: [] for k in kinds}
for r in range(rounds):
    for k, env in kinds.items():
        res[k].append(run(env))
if any(c <= 0 for c, _ in res["none"]):
    sys.exit("short_lived: the children's CPU could not be measured")

print("make -j2, %d targets (touch), %d rounds, medians (ms):" % (targets, rounds))
for k in kinds:
    print("  %-6s CPU %7.0f  wall %7.0f" % (k, statistics.median(c for c, _ in res[k]) * 1e3,
                                            statistics.median(w for _, w in res[k]) * 1e3))
for num, den in (("agent", "shim"), ("shim", "none"), ("agent", "none")):
    for i, what in ((0, "CPU"), (1, "wall")):
        rs = [a[i] / b[i] for a, b in zip(res[num], res[den])]
        print("  %s/%s %-4s x%.3f (min %.3f, max %.3f)" % (num, den, what, statistics.median(rs), min(rs), max(rs)))
PY
