#!/bin/sh
# Short-lived processes: `make -j2` of MAKE_BENCH_TARGETS tiny targets (each
# one exec of touch), run side by side with no preload, under the
# forwarding-only shim (test/bench/forward_shim.c: what any preload costs)
# and under the agent (the settings given to make, as a user would run a
# build under it). Interleaved rounds, each in another order; per round
# the children's CPU (user + system, getrusage), their page faults and the
# wall time; the agent's ratios to the shim with their spread (min-max over
# the rounds). The target is the agent within 10% of the shim. Then what
# one exec'd process pays, exactly: callgrind's instructions and the page
# faults of /bin/true alone, under the shim, and under the agent as a
# descendant of a process under it (PPROF_FAMILY naming this script).
# The same side by side for a bash script of short commands run with
# LD_PRELOAD exported (a fork per command, most of them exec'd), against
# no preload: the target is the agent within 10% of that.
#
#   sh test/bench/short_lived.sh BUILD_DIR  (MAKE_BENCH_ROUNDS=15, MAKE_BENCH_TARGETS=1200)
set -eu
build=$(cd "${1:-build}" && pwd)
agent="$build/libpprofagent.so"
shim="$build/test/bench/libforward_shim.so"
rounds=${MAKE_BENCH_ROUNDS:-15}
targets=${MAKE_BENCH_TARGETS:-1200}
[ -f "$agent" ] && [ -f "$shim" ] || { echo "short_lived: $agent or $shim missing" >&2; exit 1; }
command -v make >/dev/null || { echo "short_lived: no make" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "short_lived: no valgrind (scripts/install-deps)" >&2; exit 1; }
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

runs = 0

with open(work + "/script.sh", "w") as f:
    # A shell script of short commands, as one run with LD_PRELOAD
    # exported: per round, /bin/true (fork and exec), a command
    # substitution (a fork) and a pipeline into cat (two forks, one exec).
    f.write("i=0\nwhile [ $i -lt %d ]; do\n  /bin/true\n  x=$(echo $i)\n"
            "  echo $x | cat > /dev/null\n  i=$((i + 1))\ndone\n" % (targets // 2))

def run_script(env):
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(["bash", work + "/script.sh"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    a = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((a.ru_utime - b.ru_utime) + (a.ru_stime - b.ru_stime), wall,
            a.ru_minflt - b.ru_minflt)

def run(env):
    # A new directory each time, removed only at the end: creating files
    # right after deleting as many makes ext4 scan its recently deleted
    # inodes, a cost that varies from run to run and would drown the
    # difference measured here.
    global runs
    runs += 1
    d = work + "/out%d" % runs
    os.mkdir(d)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(["make", "-s", "-j2", "-f", work + "/Makefile", "-C", d],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    a = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((a.ru_utime - b.ru_utime) + (a.ru_stime - b.ru_stime), wall,
            a.ru_minflt - b.ru_minflt)

def measure(title, runner, per, goal_num, goal_den):
    res = {k: [] for k in kinds}
    names = list(kinds)
    for r in range(rounds):
        # each round in another order, so that no kind always follows another
        for k in names[r % len(names):] + names[:r % len(names)]:
            res[k].append(runner(kinds[k]))
    if any(r[0] <= 0 for r in res["none"]):
        sys.exit("short_lived: the children's CPU could not be measured")
    print("%s, %d rounds, medians (ms):" % (title, rounds))
    for k in kinds:
        print("  %-6s CPU %7.0f  wall %7.0f  page faults per %s %5.1f" % (
            k, statistics.median(r[0] for r in res[k]) * 1e3,
            statistics.median(r[1] for r in res[k]) * 1e3, per[0],
            statistics.median(r[2] for r in res[k]) / per[1]))
    ratio = {}
    for num, den in (("agent", "shim"), ("shim", "none"), ("agent", "none")):
        for i, what in ((0, "CPU"), (1, "wall")):
            rs = [a[i] / b[i] for a, b in zip(res[num], res[den])]
            ratio[num, den, what] = statistics.median(rs)
            print("  %s/%s %-4s x%.3f (min %.3f, max %.3f)" % (num, den, what, statistics.median(rs), min(rs), max(rs)))
    print("  goal %s/%s CPU <= x1.10: %s" % (goal_num, goal_den, "met" if ratio[goal_num, goal_den, "CPU"] <= 1.10 else "NOT met"))

measure("make -j2, %d targets (touch)" % targets, run, ("target", targets), "agent", "shim")
measure("bash script, %d rounds of /bin/true, $(echo), echo | cat" % (targets // 2),
        run_script, ("round", targets // 2), "agent", "none")

# One exec'd process, exactly. The family id names this script's process
# (pid.starttime, as the agent writes it), so the agent takes /bin/true
# for an exec'd descendant, as in the build above.
with open("/proc/self/stat") as f:
    start = f.read().rsplit(")", 1)[1].split()[19]
family = "%d.%s" % (os.getpid(), start)
one = {"none": base, "shim": kinds["shim"],
       "agent": dict(kinds["agent"], PPROF_FAMILY=family)}
print("/bin/true, one exec'd process:")
for k, env in one.items():
    out = work + "/callgrind." + k
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                    "/bin/true"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ir = None
    with open(out) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                ir = int(line.split()[1])
    if not ir:
        sys.exit("short_lived: callgrind gave no count for " + k)
    faults = []
    for _ in range(50):
        b = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        subprocess.run(["/bin/true"], env=env, check=True)
        faults.append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - b)
    print("  %-6s %8d instructions  %3d page faults" % (k, ir, statistics.median(faults)))
PY
