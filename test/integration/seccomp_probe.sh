# Only a system-call filter that went in makes the agent stand down.
# - Firefox probes for seccomp with a NULL filter through prctl and through
#   syscall(SYS_seccomp, ..., TSYNC, NULL): both fail (EFAULT) and install
#   nothing, yet the agent took either call for a sandbox and stopped for
#   good (no server, nothing served). The program probes within the start
#   delay, then probes through syscall() again and again for 600 ms (a
#   waiting thread of the agent's that took a probe in flight for a filter
#   left for good), then spins in probe_busy: the agent must serve, and a
#   CPU profile must hold probe_busy's samples.
# - The same probe from a library's constructor, inside dlopen (Firefox's
#   sandbox library): the agent's waiting thread is joined there, under the
#   loader's lock, and must not need that lock on its way out (it called
#   dlsym there, and Firefox hung). The program serves, with probe_busy in
#   its CPU profile.
# - A filter that went in (allow-all, syscall with TSYNC, within the delay)
#   still makes the agent stand down: the same output and status as
#   without the agent, no server (no port file), nothing printed.
. "$TOP/test/integration/lib.sh"

P="$BUILD/test/programs/seccomp_probe"
export PPROF_START_DELAY_MS=300

start_agent probe "$P" probe
cat "$WORK/probe.out"
grep -q '^prctl probe: -1 Bad address$' "$WORK/probe.out" || fail "the prctl probe did not fail with EFAULT"
grep -q '^seccomp probe: -1 Bad address$' "$WORK/probe.out" || fail "the seccomp probe did not fail with EFAULT"
fetch debug/pprof/profile?seconds=1 > "$WORK/probe.pb.gz"
top=$(pprof -top -unit=ms "$WORK/probe.pb.gz")
echo "$top" | head -n 12
ms=$(flat_ms "$top" spin)
cum=$(top_cum "$(pprof -top -cum -unit=ms "$WORK/probe.pb.gz")" probe_busy)
[ -n "$cum" ] && awk -v c="$cum" 'BEGIN { exit !(c > 0) }' || fail "no samples of probe_busy after the failed probes"
note "probe_busy: $cum ms in a 1 s profile (spin flat ${ms:-0} ms)"
stop "$PID"

# The probe from a library's constructor, inside dlopen.
cc -shared -fPIC -DPROBE_LIB -o "$WORK/libprobe.so" "$TOP/test/programs/seccomp_probe.c"
start_agent lib "$P" dlopen "$WORK/libprobe.so"
grep -q '^dlopen: ok$' "$WORK/lib.out" || { cat "$WORK/lib.out"; fail "dlopen of the probing library failed"; }
fetch debug/pprof/profile?seconds=1 > "$WORK/lib.pb.gz"
cum=$(top_cum "$(pprof -top -cum -unit=ms "$WORK/lib.pb.gz")" probe_busy)
[ -n "$cum" ] && awk -v c="$cum" 'BEGIN { exit !(c > 0) }' || fail "no samples of probe_busy after the probe in dlopen"
note "probe in a constructor inside dlopen: served, probe_busy $cum ms in a 1 s profile"
stop "$PID"

# A filter installed 50 ms in, within the delay.
set +e
timeout -k 5 60 "$P" allow 50 > "$WORK/allow.plain" 2>&1; plain=$?
rm -f "$WORK/allow.port"
timeout -k 5 60 env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 \
    PPROF_PORT_FILE="$WORK/allow.port" "$P" allow 50 > "$WORK/allow.agent" 2> "$WORK/allow.err"; agent=$?
set -e
cat "$WORK/allow.agent"
[ "$plain" = 0 ] && [ "$agent" = 0 ] || fail "allow: status $agent under the agent, $plain without"
cmp -s "$WORK/allow.plain" "$WORK/allow.agent" || fail "allow: output changed"
[ ! -s "$WORK/allow.err" ] || { cat "$WORK/allow.err"; fail "allow: the agent printed"; }
[ ! -s "$WORK/allow.port" ] || fail "allow: the agent served after a filter went in"
note "allow-all filter: same output, status 0, no server"
echo ok
