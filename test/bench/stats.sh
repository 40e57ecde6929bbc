# Sourced by the benchmarks: what an area starts with (bench_start), the two
# figures every time table reports, and the instructions of a loop under
# callgrind (ir).
# median and spread read one number per line from FILE, or from standard
# input.

# median [FILE]: the middle value (the mean of the two middle ones for an
# even count).
median() {
    sort -n "$@" | awk '{v[NR] = $1}
        END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# spread [FILE]: the run's own noise, (max - min) / median in percent, one
# decimal.
spread() {
    sort -n "$@" | awk '{v[NR] = $1}
        END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
             printf "%.1f", (m > 0) ? (v[NR] - v[1]) * 100 / m : 0}'
}

# need WHAT VALUE...: every VALUE is a number, or the area stops here with a
# line naming WHAT and a non-zero status (test/bench/run then fails too): a
# figure that was not measured is never printed as one.
need() {
    what=$1; shift
    [ $# -gt 0 ] || { echo "bench: no measurement of $what (nothing read)" >&2; exit 1; }
    for v in "$@"; do
        case $v in
            '' | *[!0-9.eE+-]* | *.*.*)
                echo "bench: no measurement of $what (read '$v')" >&2; exit 1 ;;
        esac
    done
}

# stamp: the line each area's output starts with: when, on which tree
# (BENCH_TREE names it outside a git checkout) and how loaded the machine
# was (a figure quoted in README.md or docs/ carries it).
stamp() {
    rev=${BENCH_TREE:-$(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null || echo "not a git tree")}
    echo "run of $(date -u '+%Y-%m-%d %H:%M UTC'), tree $rev, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
}

# ir LOOP_FUNCTION PROGRAM_AND_ARGS... -- VALGRIND_PREFIX...: the
# instructions callgrind counts inside LOOP_FUNCTION (--toggle-collect) of
# the program run by VALGRIND_PREFIX (valgrind, or env SETTINGS...
# valgrind); callgrind's file goes to the caller's $tmp.
ir() {
    fn=$1; shift
    args=""
    while [ "$1" != -- ]; do args="$args $1"; shift; done
    shift
    # shellcheck disable=SC2086
    "$@" --tool=callgrind --toggle-collect="$fn" \
        --callgrind-out-file="$tmp/cg.out" $args >/dev/null 2>&1
    awk '/^totals:/ {print $2}' "$tmp/cg.out"
}

# bench_start BUILD_DIR FILE...: what an area starts with: build (the build
# folder, absolute), agent (the library in it), work (a folder of the
# area's own) and pids (the processes the area starts in the background:
# it adds them), ended and removed at exit. Each FILE, a path in the build
# folder (test/programs/cpu_burn), is made where it is missing
# (test/bench/run makes them all first; an area run alone may not find them).
bench_start() {
    build=$(cd "$1" && pwd)
    agent="$build/libpprofagent.so"
    work=$(mktemp -d "${TMPDIR:-/tmp}/pprofagent-bench.XXXXXX")
    pids=""
    trap 'for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT
    shift
    for f in "$@"; do
        [ -e "$build/$f" ] || make -s -C "$(dirname "$0")/../.." BUILD="$build" "$build/$f" >/dev/null
    done
}
