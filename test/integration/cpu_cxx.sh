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
stop "$PID"
echo ok
