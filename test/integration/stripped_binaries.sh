# Names for stripped binaries. Copies of test/programs/stripped_target,
# whose working functions are all static, are stripped the ways
# distributions strip them and profiled side by side (CPU, 3 s):
#   buildid   debug file only in a build-ID tree under PPROF_DEBUG_DIR
#   link      debuglink: a wrong-CRC file next to the binary (ignored, one
#             log line), the right one under PPROF_DEBUG_DIR + its directory
#   dotdebug  debuglink: the debug file in the binary's .debug/ folder
#   mini      MiniDebugInfo (.gnu_debugdata) made with nm, objcopy and xz
#   none      nothing at all: addresses only, named offline by
#             `go tool pprof BINARY URL` from the unstripped binary
#   corrupt   a truncated build-ID debug file and garbage .gnu_debugdata:
#             one log line each, no names, the host runs on
# The first three must name stripped_burn and stripped_outer with file:line
# inside those functions' source lines; mini must name them.
. "$TOP/test/integration/lib.sh"

WORK=$(cd "$WORK" && pwd -P) # the path /proc/self/maps shows
orig="$BUILD/test/programs/stripped_target"
src="$TOP/test/programs/stripped_target.c"
[ -x "$orig" ] || fail "$orig is not built"
id=$(readelf -n "$orig" | sed -n 's/.*Build ID: *//p')
[ ${#id} -eq 40 ] || fail "no GNU build ID in $orig"
id_dir=$(printf %s "$id" | cut -c1-2)
id_rest=$(printf %s "$id" | cut -c3-)

# Source lines of a function: from its definition to the closing brace.
lines_of() {
    awk -v f="$1" '$0 ~ "^static .*[ *]" f "\\(" {on = 1; s = NR}
        on && /^}/ {print s, NR; exit}' "$src"
}
set -- $(lines_of stripped_burn); burn_from=$1; burn_to=$2
set -- $(lines_of stripped_outer); outer_from=$1; outer_to=$2
note "stripped_burn is lines $burn_from-$burn_to, stripped_outer $outer_from-$outer_to"

objcopy --only-keep-debug "$orig" "$WORK/stripped_target.debug"

# buildid: no link at all, the tree is the only way.
mkdir -p "$WORK/buildid" "$WORK/dd-buildid/.build-id/$id_dir"
objcopy --strip-all "$orig" "$WORK/buildid/stripped_target"
cp "$WORK/stripped_target.debug" "$WORK/dd-buildid/.build-id/$id_dir/$id_rest.debug"

# link: the right file under DIR + the binary's directory; next to the
# binary, a debug file of another program under the linked name.
mkdir -p "$WORK/link" "$WORK/dd-link$WORK/link"
objcopy --strip-all "$orig" "$WORK/link/stripped_target"
(cd "$WORK" && objcopy --add-gnu-debuglink=stripped_target.debug link/stripped_target)
cp "$WORK/stripped_target.debug" "$WORK/dd-link$WORK/link/"
objcopy --only-keep-debug "$BUILD/test/programs/cpu_burn" "$WORK/link/stripped_target.debug"

# dotdebug: the .debug/ folder next to the binary, no PPROF_DEBUG_DIR.
mkdir -p "$WORK/dotdebug/.debug"
cp "$WORK/link/stripped_target" "$WORK/dotdebug/"
cp "$WORK/stripped_target.debug" "$WORK/dotdebug/.debug/"

# mini: Fedora's recipe. The functions .dynsym lacks go into a symbol-only
# ELF, xz-compressed into .gnu_debugdata of the stripped binary.
mkdir -p "$WORK/mini"
nm -D "$orig" --format=posix --defined-only | awk '{print $1}' | sort > "$WORK/dynsyms"
nm "$orig" --format=posix --defined-only | awk '$2 == "T" || $2 == "t" {print $1}' |
    sort > "$WORK/funcsyms"
comm -13 "$WORK/dynsyms" "$WORK/funcsyms" > "$WORK/keep_symbols"
grep -qx stripped_burn "$WORK/keep_symbols" || fail "nm does not list stripped_burn"
objcopy -S --remove-section .gdb_index --remove-section .comment \
    --keep-symbols="$WORK/keep_symbols" "$WORK/stripped_target.debug" "$WORK/mini_debuginfo"
xz -f "$WORK/mini_debuginfo"
cp "$orig" "$WORK/mini/stripped_target"
strip --strip-all -R .comment "$WORK/mini/stripped_target"
objcopy --add-section .gnu_debugdata="$WORK/mini_debuginfo.xz" "$WORK/mini/stripped_target"

# none: stripped, nothing to find anywhere.
mkdir -p "$WORK/none"
objcopy --strip-all "$orig" "$WORK/none/stripped_target"

# corrupt: a truncated debug file in the tree, garbage MiniDebugInfo.
mkdir -p "$WORK/corrupt" "$WORK/dd-corrupt/.build-id/$id_dir"
head -c 3000 "$WORK/stripped_target.debug" > "$WORK/dd-corrupt/.build-id/$id_dir/$id_rest.debug"
head -c 4096 /dev/urandom > "$WORK/garbage.xz"
objcopy --strip-all --add-section .gnu_debugdata="$WORK/garbage.xz" "$orig" \
    "$WORK/corrupt/stripped_target"

for v in buildid link dotdebug mini none corrupt; do
    [ -z "$(nm "$WORK/$v/stripped_target" 2>/dev/null)" ] || fail "$v still has a .symtab"
done

dd_of() {
    case $1 in
        buildid) echo "$WORK/dd-buildid" ;;
        link) echo "/nonexistent:$WORK/dd-link" ;;
        corrupt) echo "$WORK/dd-corrupt" ;;
        *) echo "" ;;
    esac
}

variants="buildid link dotdebug mini none corrupt"
# The symbolizer's notes are debug lines.
export PPROF_LOG=debug
for v in $variants; do
    if [ -n "$(dd_of $v)" ]; then
        start_agent "$v" env PPROF_DEBUG_DIR="$(dd_of $v)" "$WORK/$v/stripped_target" 120
    else
        start_agent "$v" "$WORK/$v/stripped_target" 120
    fi
    eval "pid_$v=$PID addr_$v=$ADDR"
done
unset PPROF_LOG

# All CPU profiles at once, so the six burners share the same 3 s.
fetchers=""
for v in $variants; do
    eval "a=\$addr_$v"
    curl -sS --max-time 60 -o "$WORK/$v.pb.gz" "http://$a/debug/pprof/profile?seconds=3" &
    fetchers="$fetchers $!"
done
for f in $fetchers; do wait "$f" || fail "a CPU profile request failed"; done

# check_lines VARIANT: every location of stripped_burn / stripped_outer has
# a line inside that function, and both are present.
check_lines() {
    out=$(pprof -top -lines -nodecount=100 "$WORK/$1.pb.gz")
    echo "$out" | grep stripped_ | head -n 6
    n=0
    for fn in stripped_burn stripped_outer; do
        if [ $fn = stripped_burn ]; then from=$burn_from to=$burn_to; else from=$outer_from to=$outer_to; fi
        got=$(printf '%s\n' "$out" | awk -v f=$fn '$6 == f {print $7}')
        [ -n "$got" ] || { echo "$out" | head -n 20 >&2; fail "$1: no $fn with a line"; }
        for fl in $got; do
            case $fl in *stripped_target.c:*) ;; *) fail "$1: $fn at $fl, not in stripped_target.c" ;; esac
            l=${fl##*:}
            [ "$l" -ge "$from" ] && [ "$l" -le "$to" ] ||
                fail "$1: $fn at line $l, outside $from-$to"
            n=$((n + 1))
        done
    done
    note "$1: $n locations of stripped_burn/stripped_outer, all inside their lines"
}

# Share of samples whose leaf is stripped_burn, in percent.
burn_share() {
    pprof -top -nodecount=100 "$1" | awk '$6 == "stripped_burn" {sub("%", "", $2); print int($2)}'
}

for v in buildid link dotdebug; do
    check_lines $v
    s=$(burn_share "$WORK/$v.pb.gz")
    [ "${s:-0}" -ge 90 ] || fail "$v: stripped_burn is the leaf of only ${s:-0}% of samples"
    raw=$(pprof -raw "$WORK/$v.pb.gz" | sed -n '/^Mappings/,$p')
    main=$(printf '%s\n' "$raw" | grep "^1: ")
    expect_contains "$main" "$WORK/$v/stripped_target $id [FN][FL][LN]" "$v main mapping"
done
# The wrong-CRC file next to the binary cost exactly one line.
n=$(grep -c "link/stripped_target.debug for .* has CRC" "$WORK/link.err" || true)
[ "$n" -eq 1 ] || { cat "$WORK/link.err" >&2; fail "link: $n CRC mismatch lines, want 1"; }

# MiniDebugInfo has names but no lines.
s=$(burn_share "$WORK/mini.pb.gz")
[ "${s:-0}" -ge 90 ] || fail "mini: stripped_burn is the leaf of only ${s:-0}% of samples"
expect_contains "$(pprof -top -nodecount=100 "$WORK/mini.pb.gz")" stripped_outer "mini profile"
expect_contains "$(pprof -raw "$WORK/mini.pb.gz" | grep '^1: ')" "$id [FN]" "mini main mapping"

# none: the profile keeps what offline symbolization needs (path, build ID,
# no has_functions); code in the binary is named after the function it
# belongs to, by the start the unwind tables give: stripped_burn's start as
# the unstripped binary's symbol table has it, one name for every address
# in it...
raw=$(pprof -raw "$WORK/none.pb.gz")
main=$(printf '%s\n' "$raw" | grep '^1: ')
expect_contains "$main" "$WORK/none/stripped_target $id" "none main mapping"
expect_not_contains "$main" "[FN]" "none main mapping"
locs=$(printf '%s\n' "$raw" | sed -n '/^Locations/,/^Mappings/p' | grep -c ' M=1 *$' || true)
[ "$locs" -eq 0 ] || fail "none: $locs locations in the binary without a name"
burn_at=$(nm "$orig" | sed -n 's/^0*\([0-9a-f]*\) t stripped_burn$/\1/p')
top=$(pprof -symbolize=none -top -nodecount=100 "$WORK/none.pb.gz")
expect_not_contains "$top" stripped_burn "none profile"
s=$(printf '%s\n' "$top" | awk -v f="stripped_target+0x$burn_at" '$6 == f {sub("%", "", $2); print int($2)}')
[ "${s:-0}" -ge 90 ] || { echo "$top" | head -n 12; fail "none: stripped_target+0x$burn_at (stripped_burn) is the leaf of ${s:-0}% of samples"; }
note "none: stripped_burn is stripped_target+0x$burn_at, the leaf of $s% of samples"
grep -q "none/stripped_target (build ID $id) has no symbol table" "$WORK/none.err" ||
    { cat "$WORK/none.err" >&2; fail "none: no log line about the missing symbols"; }
index=$(ADDR=$addr_none fetch debug/pprof/)
expect_contains "$index" "<li>$WORK/none/stripped_target (build ID $id): no symbols</li>" "none index"
index=$(ADDR=$addr_buildid fetch debug/pprof/)
expect_not_contains "$index" "buildid/stripped_target" "buildid index"

# ...and go tool pprof, given the unstripped binary, names them offline
# with file:line at the profile's exact addresses.
out=$(pprof -top -lines -nodecount=100 "$orig" "http://$addr_none/debug/pprof/profile?seconds=2")
printf '%s\n' "$out" | grep stripped_ | head -n 4
for fn in stripped_burn stripped_outer; do
    if [ $fn = stripped_burn ]; then from=$burn_from to=$burn_to; else from=$outer_from to=$outer_to; fi
    got=$(printf '%s\n' "$out" | awk -v f=$fn '$6 == f {print $7}')
    [ -n "$got" ] || { echo "$out" | head -n 20 >&2; fail "offline: no $fn"; }
    for fl in $got; do
        l=${fl##*:}
        [ "$l" -ge "$from" ] && [ "$l" -le "$to" ] || fail "offline: $fn at line $l, outside $from-$to"
    done
done
note "offline: go tool pprof BINARY names stripped_burn and stripped_outer inside their lines"

# corrupt: one line per bad file, no names, host alive and serving.
grep -q "dd-corrupt/.build-id/$id_dir/$id_rest.debug for .* has no symbols or is truncated" \
    "$WORK/corrupt.err" || { cat "$WORK/corrupt.err" >&2; fail "corrupt: no line for the truncated debug file"; }
grep -q "MiniDebugInfo of $WORK/corrupt/stripped_target cannot be decompressed" \
    "$WORK/corrupt.err" || { cat "$WORK/corrupt.err" >&2; fail "corrupt: no line for the garbage MiniDebugInfo"; }
n=$(grep -c "corrupt" "$WORK/corrupt.err" || true)
[ "$n" -le 3 ] || fail "corrupt: $n log lines"
expect_not_contains "$(pprof -symbolize=none -top "$WORK/corrupt.pb.gz")" stripped_burn "corrupt profile"
[ "$(ADDR=$addr_corrupt http_status debug/pprof/)" = 200 ] || fail "corrupt: index not served"

# At the default level a binary without symbols costs no line: the only
# one is where the process serves.
start_agent quiet "$WORK/none/stripped_target" 120
fetch 'debug/pprof/profile?seconds=1' > "$WORK/quiet.pb.gz"
n=$(grep -vc "^pprofagent: serving http://$ADDR/debug/pprof/ (pid $PID)\$" "$WORK/quiet.err" || true)
[ "$n" -eq 0 ] || { cat "$WORK/quiet.err" >&2; fail "quiet: $n lines beside the serving line at the default level"; }
stop "$PID"

for v in $variants; do
    eval "p=\$pid_$v"
    kill -0 "$p" 2>/dev/null || fail "$v: the host died"
    stop "$p"
done
echo ok
