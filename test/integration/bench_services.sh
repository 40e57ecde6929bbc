# The services bench (test/bench/services.sh, `make bench` area services)
# runs and reports, in a quick form: 1 round of 1 s, no agent and the
# agent's defaults, for redis, nginx and PostgreSQL; each service gets a
# ratio line, and the CPU method is named. Its figures are not checked
# here (one round on a shared machine says nothing; they are the bench's).
# A load generator that reports an error fails its row by name, and the
# area exits non-zero: no figure is printed for it. The /proc fallback
# (no cgroup) measures too.
. "$TOP/test/integration/lib.sh"
bench="$TOP/test/bench/services.sh"

SERVICES_ROUNDS=1 SERVICES_SECONDS=1 SERVICES_CONFIGS="none defaults" \
    sh "$bench" "$BUILD" >"$WORK/quick.out" 2>&1 || { cat "$WORK/quick.out"; fail "services.sh failed"; }
cat "$WORK/quick.out"
grep -q '^services: CPU read from \(cpuacct\|cgroup2\|proc\)$' "$WORK/quick.out" || fail "no CPU method named"
grep -q '^run of .*, load average ' "$WORK/quick.out" || fail "no date, tree and load line"
for s in redis nginx postgres; do
    grep -Eq "^\| $s \| agent, defaults \| [0-9.]+ \| [0-9.]+ \([0-9.]+\.\.[0-9.]+\) \| <= 1.01 \| [a-z ]+ \|" \
        "$WORK/quick.out" || fail "no ratio line for $s"
done

# The fallback: the service's process tree in /proc.
SERVICES=redis SERVICES_CPU=proc SERVICES_ROUNDS=1 SERVICES_SECONDS=1 SERVICES_CONFIGS=none \
    sh "$bench" "$BUILD" >"$WORK/proc.out" 2>&1 || { cat "$WORK/proc.out"; fail "services.sh (proc) failed"; }
grep -q '^services: CPU read from proc$' "$WORK/proc.out" || fail "the proc method was not used"
grep -Eq '^\| redis \| no agent \| [0-9.]+ \| 1.000 ' "$WORK/proc.out" || fail "no ratio line from /proc"
note "$(grep '^| redis | no agent' "$WORK/proc.out")"

# A redis-benchmark that reports an error: the row fails by name.
mkdir -p "$WORK/fake"
printf '#!/bin/sh\necho "Error from server: ERR unknown command"\nexit 0\n' >"$WORK/fake/redis-benchmark"
chmod +x "$WORK/fake/redis-benchmark"
if PATH="$WORK/fake:$PATH" SERVICES=redis SERVICES_ROUNDS=1 SERVICES_SECONDS=1 SERVICES_CONFIGS=none \
    sh "$bench" "$BUILD" >"$WORK/bad.out" 2>&1; then
    cat "$WORK/bad.out"; fail "services.sh passed with failing requests"
fi
grep -q '^services: FAILED redis none: redis-benchmark failed' "$WORK/bad.out" ||
    { cat "$WORK/bad.out"; fail "the failed row is not named"; }
grep -q '^| redis |' "$WORK/bad.out" && fail "a figure was printed for a failed row"
echo PASS
