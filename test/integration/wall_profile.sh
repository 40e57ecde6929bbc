# /debug/pprof/wall: every thread sampled whatever it is doing
# (test/programs/wall_truth). The napper thread alternates nap() (nanosleep
# 10 ms) and work() (5 ms of spinning) and measures the wall time of each;
# the burner computes in burn() all the time, measuring it too. Over a 10 s
# profile at the default 50 Hz:
# - napper's wall share in nap() and in work() within 10 points of what it
#   measured, and its total and the burner's within 10% of their measured
#   wall time;
# - the main thread's every sample walks through main() to _start;
# - labels: state=sleeping with syscall clock_nanosleep for nap(), the
#   off-CPU view (-tagfocus=state=sleeping) holds no burn();
# - the napper never sees EINTR (its sleeps are walked, never signalled);
# - bad seconds refused; listed in the index and the flame graph.
. "$TOP/test/integration/lib.sh"
prog="$BUILD/test/programs/wall_truth"

start_agent wall "$prog" 120
for i in $(seq 100); do grep -q '^started' "$WORK/wall.out" && break; sleep 0.05; done
measured() { # "nap work burn eintr", ns
    n=$(grep -c '^nap=' "$WORK/wall.out" || true)
    kill -USR1 "$PID"
    for i in $(seq 100); do
        [ "$(grep -c '^nap=' "$WORK/wall.out" || true)" -gt "$n" ] && break
        sleep 0.05
    done
    grep '^nap=' "$WORK/wall.out" | tail -n 1 | sed 's/[a-z]*=//g'
}
set -- $(measured); n0=$1 w0=$2 b0=$3
fetch "debug/pprof/wall?seconds=10" > "$WORK/wall.pb.gz"
set -- $(measured); n1=$1 w1=$2 b1=$3 eintr=$4

cum() { # cum wall ms of function $2 in the top output $1
    printf '%s\n' "$1" | awk -v f="$2" '$NF == f {v = $4; sub(/ms$/, "", v); print v + 0; exit}'
}
top=$(pprof -top -cum -unit=ms -sample_index=wall "$WORK/wall.pb.gz")
echo "$top"
expect_contains "$top" "Type: wall"
napper=$(pprof -top -cum -unit=ms -sample_index=wall -tagfocus=thread=napper "$WORK/wall.pb.gz")
burner=$(pprof -top -cum -unit=ms -sample_index=wall -tagfocus=thread=burner "$WORK/wall.pb.gz")
pn=$(cum "$napper" nap) pw=$(cum "$napper" work) pt=$(cum "$napper" napper) pb=$(cum "$burner" burn)
note "napper: profile nap ${pn:-?} ms work ${pw:-?} ms (all ${pt:-?} ms); burner: burn ${pb:-?} ms"
[ -n "$pn" ] && [ -n "$pw" ] && [ -n "$pb" ] || fail "nap, work or burn missing from the wall profile"
awk -v n0="$n0" -v n1="$n1" -v w0="$w0" -v w1="$w1" -v b0="$b0" -v b1="$b1" \
    -v pn="$pn" -v pw="$pw" -v pt="$pt" -v pb="$pb" '
BEGIN {
    mn = (n1 - n0) / 1e6; mw = (w1 - w0) / 1e6; mb = (b1 - b0) / 1e6
    ms = mn / (mn + mw) * 100; ps = pn / (pn + pw) * 100
    d = ms - ps; if (d < 0) d = -d
    printf "# napper measured nap %.0f ms work %.0f ms: nap %.1f%%; profile %.1f%% (diff %.1f points)\n", mn, mw, ms, ps, d
    printf "# napper wall: measured %.0f ms, profile %.0f ms; burner: measured %.0f ms, profile %.0f ms\n", mn + mw, pt, mb, pb
    bad = 0
    if (d > 10) { print "# nap share off by more than 10 points"; bad = 1 }
    r = pt / (mn + mw); if (r < 0.9 || r > 1.1) { print "# napper wall off by more than 10%"; bad = 1 }
    r = pb / mb; if (r < 0.9 || r > 1.1) { print "# burner wall off by more than 10%"; bad = 1 }
    exit bad
}' || fail "wall shares differ from the measured ones"

# The main thread (in nanosleep under main, which keeps two sigset_t of
# mostly unwritten stack, stale return addresses in them): every sample of
# it is walked through main down to _start, none stops at a stale frame.
mainthr=$(pprof -top -cum -unit=ms -sample_index=wall -tagfocus=thread=wall_truth "$WORK/wall.pb.gz")
pm=$(cum "$mainthr" main) ps=$(cum "$mainthr" _start)
note "main thread: main ${pm:-?} ms, _start ${ps:-?} ms"
[ -n "$pm" ] && [ "$pm" = "$ps" ] || { echo "$mainthr"; fail "main thread samples do not all reach _start through main"; }

# Labels: the off-CPU view.
tags=$(pprof -tags -tagfocus=thread=napper "$WORK/wall.pb.gz")
echo "$tags"
expect_contains "$tags" "sleeping"
expect_contains "$tags" "running"
expect_contains "$tags" "clock_nanosleep"
off=$(pprof -top -cum -sample_index=wall -tagfocus=state=sleeping "$WORK/wall.pb.gz")
expect_contains "$off" " nap"
expect_not_contains "$off" " burn" "the off-CPU view"

[ "$eintr" = 0 ] || fail "the napper saw $eintr EINTR"
[ "$(http_status 'debug/pprof/wall?seconds=0')" = 400 ] || fail "seconds=0 is not refused"
index=$(fetch 'debug/pprof/')
expect_contains "$index" "<a href='wall?debug=1'>wall</a>"
expect_contains "$index" "<a href='flamegraph?profile=wall'>"
svg=$(fetch "debug/pprof/flamegraph?profile=wall&seconds=1")
expect_contains "$svg" "<svg"
stop "$PID"
echo ok
