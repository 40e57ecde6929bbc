# C++ functions come out of a CPU profile with readable (demangled) names,
# and the agent's own threads are never sampled.
. "$TOP/test/integration/lib.sh"

start_agent cxx "$BUILD/test/programs/cpu_cxx" 60
top=$(pprof -top -nodecount=30 "http://$ADDR/debug/pprof/profile?seconds=2")
echo "$top"
expect_contains "$top" "work::Burner::churn" "C++ profile"
expect_contains "$top" "work::mix" "C++ profile"
expect_not_contains "$top" "_ZN4work" "C++ profile"
expect_not_contains "$top" "mg_" "C++ profile (agent threads)"
# By default the full names: parameters and template arguments.
expect_contains "$top" "work::mix<unsigned long>(unsigned long, long)" "C++ profile (full names)"
stop "$PID"

# PPROF_SYMBOLS=short: pprof's short names (no parameters, template
# arguments or return type), the full name kept as the system name.
PPROF_SYMBOLS=short start_agent short "$BUILD/test/programs/cpu_cxx" 60
fetch "debug/pprof/profile?seconds=2" > "$WORK/short.pb.gz"
top=$(pprof -top -nodecount=30 "$WORK/short.pb.gz")
echo "$top"
for fn in work::mix work::Burner::churn; do
    printf '%s\n' "$top" | awk -v f="$fn" '$6 == f && NF == 6 { ok = 1 } END { exit !ok }' \
        || fail "short names: no line for exactly '$fn'"
done
expect_not_contains "$top" "(long)" "short names"
raw=$(pprof -raw "$WORK/short.pb.gz")
expect_contains "$raw" "unsigned long work::mix<unsigned long>(unsigned long, long)" "system names"
stop "$PID"
echo ok
