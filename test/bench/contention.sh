#!/bin/sh
# Cost of the lock interposers: a contended-mutex workload and an
# uncontended lock/unlock loop, without and with the agent at its default
# settings, interleaved run by run; medians, ratios, ns added per
# uncontended lock+unlock pair, and callgrind instructions per pair. The
# same for the futex interposer (syscall()): a Rust std::sync::Mutex
# lock+unlock pair (never a system call when free), an uncontended
# syscall(SYS_futex, FUTEX_WAKE) and another system call through syscall().
# Also the pair in a program with one thread (glibc's single-thread path;
# with the server on, and with PPROF_ADDR=off where the agent creates no
# thread) and while the agent follows a waiter blocked on another mutex.
# Every time column states its own noise: the spread of the run without the
# agent over its rounds ((max - min) / median), measured in the same run.
#
#   sh test/bench/contention.sh BUILD_DIR
#
# Environment: RUNS (default 9), THREADS (4), ROUNDS (200000 per thread),
# PAIRS (20000000), and AGENT_ENV, extra settings for the agent runs (to
# compare other rates with the same script).
set -eu
. "$(dirname "$0")/stats.sh"
build=$(cd "${1:-build}" && pwd)
agent=${AGENT:-$build/libpprofagent.so}
prog="$build/test/programs/contention_bench"
rprog="$build/test/programs/futex_bench_rust"
runs=${RUNS:-9}
threads=${THREADS:-4}
rounds=${ROUNDS:-200000}
pairs=${PAIRS:-20000000}
agent_env=${AGENT_ENV:-}
top=$(cd "$(dirname "$0")/../.." && pwd)
[ -x "$prog" ] || make -s -C "$top" BUILD="$build" "$prog" >/dev/null
[ -x "$rprog" ] || make -s -C "$top" BUILD="$build" "$rprog" >/dev/null
calls=${CALLS:-2000000}
[ -f "$agent" ] || { echo "contention bench: $agent is missing" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

under_agent() {
    # shellcheck disable=SC2086
    env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet $agent_env "$@"
}


i=0
while [ $i -lt "$runs" ]; do
    i=$((i + 1))
    "$prog" contended "$threads" "$rounds" | sed 's/.*wall_ms=\([0-9.]*\).*/\1/' >>"$tmp/c0"
    under_agent "$prog" contended "$threads" "$rounds" | sed 's/.*wall_ms=\([0-9.]*\).*/\1/' >>"$tmp/c1"
    "$prog" uncontended "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/u0"
    under_agent "$prog" uncontended "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/u1"
    "$prog" uncontended_single "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/g0"
    under_agent "$prog" uncontended_single "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/g1"
    under_agent env PPROF_ADDR=off "$prog" uncontended_single "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/g2"
    under_agent env PPROF_MUTEX_FRACTION=1 "$prog" uncontended_followed "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/w1"
    "$rprog" "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/r0"
    under_agent "$rprog" "$pairs" | sed 's/ns_per_pair=//' >>"$tmp/r1"
    "$prog" futex_wake "$calls" | sed 's/ns_per_call=//' >>"$tmp/f0"
    under_agent "$prog" futex_wake "$calls" | sed 's/ns_per_call=//' >>"$tmp/f1"
    "$prog" syscall "$calls" | sed 's/ns_per_call=//' >>"$tmp/s0"
    under_agent "$prog" syscall "$calls" | sed 's/ns_per_call=//' >>"$tmp/s1"
done

# spread FILE: (max - min) / median of the rounds, in percent.

c0=$(median <"$tmp/c0"); c1=$(median <"$tmp/c1")
u0=$(median <"$tmp/u0"); u1=$(median <"$tmp/u1")
g0=$(median <"$tmp/g0"); g1=$(median <"$tmp/g1"); g2=$(median <"$tmp/g2")
w1=$(median <"$tmp/w1")
r0=$(median <"$tmp/r0"); r1=$(median <"$tmp/r1")
f0=$(median <"$tmp/f0"); f1=$(median <"$tmp/f1")
s0=$(median <"$tmp/s0"); s1=$(median <"$tmp/s1")

# Instructions inside the loop only (--toggle-collect), warm-up included:
# n/10 + n pairs.
n=200000
with_agent="env LD_PRELOAD=$agent PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet $agent_env valgrind"
i0=$(ir uncontended_loop "$prog" uncontended "$n" -- valgrind)
# shellcheck disable=SC2086
i1=$(ir uncontended_loop "$prog" uncontended "$n" -- $with_agent)
ri0=$(ir uncontended_loop "$rprog" "$n" -- valgrind)
# shellcheck disable=SC2086
ri1=$(ir uncontended_loop "$rprog" "$n" -- $with_agent)
fi0=$(ir futex_wake_loop "$prog" futex_wake "$n" -- valgrind)
# shellcheck disable=SC2086
fi1=$(ir futex_wake_loop "$prog" futex_wake "$n" -- $with_agent)
# A wake while the agent follows a waiter parked on another word (one in
# PPROF_MUTEX_FRACTION waits is followed; an idle thread pool nearly
# always has one): each wake looks for followed waiters of its own address.
pi0=$(ir futex_wake_loop "$prog" futex_wake_parked "$n" -- valgrind)
pi1=$(ir futex_wake_loop "$prog" futex_wake_parked "$n" -- env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet PPROF_MUTEX_FRACTION=1 valgrind)
gi0=$(ir uncontended_loop "$prog" uncontended_single "$n" -- valgrind)
# shellcheck disable=SC2086
gi1=$(ir uncontended_loop "$prog" uncontended_single "$n" -- $with_agent)
gi2=$(ir uncontended_loop "$prog" uncontended_single "$n" -- env LD_PRELOAD="$agent" PPROF_ADDR=off PPROF_LOG=quiet $agent_env valgrind)
wi1=$(ir uncontended_loop "$prog" uncontended_followed "$n" -- env LD_PRELOAD="$agent" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet PPROF_MUTEX_FRACTION=1 valgrind)
si0=$(ir syscall_loop "$prog" syscall "$n" -- valgrind)
# shellcheck disable=SC2086
si1=$(ir syscall_loop "$prog" syscall "$n" -- $with_agent)

need "the contention area's callgrind counts" "$i0" "$i1" "$ri0" "$ri1" "$fi0" "$fi1" "$pi0" "$pi1" "$gi0" "$gi1" "$gi2" "$wi1" "$si0" "$si1"
for f in c0 c1 u0 u1 g0 g1 g2 w1 r0 r1 f0 f1 s0 s1; do need "contention timings ($f)" $(cat "$tmp/$f"); done

# ns_row LABEL WITHOUT WITH RUNS_FILE [DECIMALS]: a table row of CPU ns,
# the difference and the noise of the runs without the agent.
ns_row() {
    awk -v l="$1" -v a="$2" -v b="$3" -v z="$(spread "$4")" -v d="${5:-2}" 'BEGIN {
        f = "%." d "f"; g = "%+." d "f"
        printf "| %s | " f " | " f " | " g " ns | %s%% |\n", l, a, b, b - a, z }'
}
# insn_row LABEL WITHOUT WITH: a table row of callgrind instructions per
# round (n rounds after n / 10 of warm-up).
insn_row() {
    awk -v l="$1" -v a="$2" -v b="$3" -v n="$n" 'BEGIN {
        p = n + int(n / 10)
        printf "| %s | %.1f | %.1f | +%.1f | - |\n", l, a / p, b / p, (b - a) / p }'
}
echo "contention: $runs interleaved runs, medians; agent settings: defaults${agent_env:+ + $agent_env}"
echo "noise: the spread ((max - min) / median) of the runs without the agent, this run;"
echo "a difference within it is not a measured cost. Instruction counts have no noise."
echo
echo "| workload | without agent | with agent | ratio / added | noise |"
echo "|---|---|---|---|---|"
awk -v a="$c0" -v b="$c1" -v t="$threads" -v r="$rounds" -v z="$(spread "$tmp/c0")" 'BEGIN {
    printf "| contended mutex, %d threads x %d rounds (wall ms) | %.1f | %.1f | %.3f | %s%% |\n", t, r, a, b, b / a, z }'
ns_row "uncontended lock+unlock pair, idle second thread (ns, CPU time)" "$u0" "$u1" "$tmp/u0"
insn_row "uncontended pair, callgrind instructions" "$i0" "$i1"
ns_row "the pair with one host thread (ns, CPU time)" "$g0" "$g1" "$tmp/g0"
ns_row "the same, PPROF_ADDR=off (no agent thread)" "$g0" "$g2" "$tmp/g0"
awk -v a="$gi0" -v b="$gi1" -v c="$gi2" -v n="$n" 'BEGIN {
    p = n + int(n / 10)
    printf "| one host thread, callgrind instructions (server on / PPROF_ADDR=off) | %.1f | %.1f / %.1f | +%.1f / +%.1f | - |\n", a / p, b / p, c / p, (b - a) / p, (c - a) / p }'
ns_row "the pair while a waiter is followed elsewhere (ns; without = agent, nobody followed)" "$u1" "$w1" "$tmp/u0"
insn_row "followed elsewhere, callgrind instructions (without = agent, nobody followed)" "$i1" "$wi1"
ns_row "Rust std Mutex uncontended lock+unlock pair (ns, CPU time)" "$r0" "$r1" "$tmp/r0"
insn_row "Rust pair, callgrind instructions" "$ri0" "$ri1"
ns_row "syscall(SYS_futex, FUTEX_WAKE), nobody waiting (ns, CPU time)" "$f0" "$f1" "$tmp/f0" 1
insn_row "FUTEX_WAKE call, callgrind instructions (user space)" "$fi0" "$fi1"
insn_row "FUTEX_WAKE while a waiter is followed elsewhere, callgrind instructions" "$pi0" "$pi1"
ns_row "syscall(SYS_getppid) (ns, CPU time)" "$s0" "$s1" "$tmp/s0" 1
insn_row "other syscall() call, callgrind instructions (user space)" "$si0" "$si1"
