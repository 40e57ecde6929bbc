# Heap profile truth at the default rate (R = 524288): the unsampled
# in-use bytes of each site of test/programs/heap_truth are compared with
# the truth the program prints.
#
# The standard deviation of a site's estimate: N live objects of S bytes,
# each sampled independently with p = 1 - exp(-(S + 1) / R) and counted
# S / p bytes when sampled, give Var = N (1 - p) / p * S^2, so
# SD = S * sqrt(N (1 - p) / p). For 96 MiB of 1000-byte objects that is
# 7.2% of the truth, for 32 MiB of 64 KiB objects 12%, for 1M 32-byte
# objects 12.6%.
#
# 1. One run: each big site within 4 SD of the truth (at 3 SD, three sites
#    gave a false failure in about one suite run of 120: z -3.03 seen once).
# 2. RUNS runs: the mean of each site's estimates within 3.5 SD/sqrt(RUNS)
#    of the truth (no bias; tcmalloc 2.10's sampler reads small objects
#    about 15% low, which is 3.7 SD of the mean here for live_small).
. "$TOP/test/integration/lib.sh"

RUNS=20
SMALL=1000000
RATE=524288
unset PPROF_HEAP_RATE

: > "$WORK/all.sites"
# one_run RUN: a process of its own, its sites in $WORK/runRUN.sites. Run
# in a subshell, two at a time (two cores; the runs share nothing): it
# ends the program it started however it exits.
one_run() {
    run=$1
    trap 'for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done' EXIT
    start_agent "run$run" "$BUILD/test/programs/heap_truth" "$SMALL"
    for i in $(seq 600); do
        grep -q '^ready' "$WORK/run$run.out" && break
        sleep 0.1
    done
    grep -q '^ready' "$WORK/run$run.out" || fail "run $run did not get ready"
    fetch debug/pprof/heap > "$WORK/run$run.pb.gz"
    stop "$PID"
    pprof -raw "$WORK/run$run.pb.gz" > "$WORK/run$run.raw"
    grep -q "Period: $RATE" "$WORK/run$run.raw" || fail "period is not $RATE"
    awk -f "$TOP/test/integration/heap_sites.awk" "$WORK/run$run.raw" \
        | sed "s/^/$run /" > "$WORK/run$run.sites"
}
for run in $(seq 1 2 "$RUNS"); do
    one_run "$run" & a=$!
    pair=""
    if [ "$run" -lt "$RUNS" ]; then one_run $((run + 1)) & pair=$!; fi
    wait "$a" || fail "run $run failed"
    [ -z "$pair" ] || wait "$pair" || fail "run $((run + 1)) failed"
done
for run in $(seq "$RUNS"); do cat "$WORK/run$run.sites"; done > "$WORK/all.sites"
grep '^expect ' "$WORK/run1.out" > "$WORK/truth"

# For each checked site: the first run's z-score and the mean's z-score.
awk -v runs="$RUNS" -v R="$RATE" '
    FNR == NR { io[$2] = $3; ib[$2] = $4; next }
    { est[$2, $1] = $4 }
    END {
        split("live_1000 live_64k live_small cross_thread realloc_chain", sites, " ")
        bad = 0
        for (k = 1; k <= 5; k++) {
            s = sites[k]; n = io[s]; size = ib[s] / n
            p = 1 - exp(-(size + 1) / R)
            sd = size * sqrt(n * (1 - p) / p)
            sum = 0
            for (r = 1; r <= runs; r++) sum += est[s, r]
            mean = sum / runs
            z1 = (est[s, 1] - ib[s]) / sd
            zm = (mean - ib[s]) / (sd / sqrt(runs))
            printf "%-14s truth %10d  run1 %10d (z %+.2f)  mean of %d %12.0f (%+.2f%%, z %+.2f)  SD %.1f%%\n",
                s, ib[s], est[s, 1], z1, runs, mean, 100 * (mean - ib[s]) / ib[s], zm, 100 * sd / ib[s]
            if (k <= 3 && (z1 > 4 || z1 < -4)) { print "FAIL: " s " run 1 is beyond 4 SD"; bad = 1 }
            if (zm > 3.5 || zm < -3.5) { print "FAIL: " s " mean is beyond 3.5 SD of the mean (biased)"; bad = 1 }
        }
        exit bad
    }' "$WORK/truth" "$WORK/all.sites" || fail "estimates off (see above)"
echo "ok"
