# A musl program under the agent: musl's loader refuses a preload with a
# name it cannot resolve (exit 127, "Error relocating ...: symbol not
# found"), so every name only glibc has is a weak reference in the agent,
# and under musl the agent stands aside (process/init.c). Checks:
# - no import of the agent is missing from musl's C library unless weak,
#   and no dependency is one musl's loader cannot find;
# - a dynamic musl program (test/programs/musl_host.c, built here with
#   musl-gcc) calls the agent's interposers and gives the output and exit
#   status of its run without the agent: with PPROF_ENABLE=0, with the
#   defaults, with PPROF_ADDR (and a start at once: no server, no port
#   file), through musl's loader run by hand, and statically linked (where
#   LD_PRELOAD does nothing);
# - stderr stays empty but for the one documented line, printed only where
#   PPROF_ADDR asked for a server, and not with PPROF_LOG=quiet.
. "$TOP/test/integration/lib.sh"

command -v musl-gcc >/dev/null 2>&1 ||
    { echo "ok (skipped: musl-gcc is not installed; scripts/install-deps installs musl-tools)"; exit 0; }
LINE="pprofagent: not a glibc process (musl?): the agent stands aside; profiling is off in this process"

P="$WORK/musl_host"
musl-gcc -std=gnu11 -O1 -g -D_GNU_SOURCE -pthread \
    "$TOP/test/programs/musl_host.c" -o "$P" || fail "musl-gcc failed"
readelf -l "$P" | grep -q 'interpreter: .*ld-musl' || fail "$P is not a dynamic musl program"

# musl's loader is its C library too: the program's interpreter.
MUSL_LIBC=$(readelf -l "$P" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
[ -f "$MUSL_LIBC" ] || fail "no musl loader found ($MUSL_LIBC)"

# The imports: every strong one must be musl's (weak ones resolve to 0).
nm -D --defined-only "$MUSL_LIBC" | awk '{print $3}' | sort -u > "$WORK/musl.names"
nm -D --undefined-only "$AGENT" | awk '$1 == "U" {sub(/@.*/, "", $2); print $2}' |
    sort -u > "$WORK/agent.strong"
# musl 1.2.4 and later define no *64 names (stat64, fopen64) but their
# loader binds them to the standard ones.
missing=$(comm -23 "$WORK/agent.strong" "$WORK/musl.names" |
    awk -v names="$WORK/musl.names" '
        BEGIN { while ((getline n < names) > 0) have[n] = 1 }
        !(/64$/ && (substr($0, 1, length($0) - 2) in have))')
[ -z "$missing" ] ||
    fail "the agent imports names musl lacks (make them weak, or forward at run time):
$missing"
# Its dependencies: names musl's loader takes as its own C library.
needed=$(readelf -d "$AGENT" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for lib in $needed; do
    case "$lib" in
    libc.so*|libpthread.so*|librt.so*|libm.so*|libdl.so*|libutil.so*) ;;
    *) fail "the agent depends on $lib, which musl's loader cannot find" ;;
    esac
done
note "imports: $(wc -l < "$WORK/agent.strong") strong ones, all in musl's C library; needed: $needed"

# run NAME CMD...: runs CMD, keeping its stdout, stderr and status.
run() {
    name=$1; shift
    set +e
    "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
    echo $? >"$WORK/$name.status"
    set -e
}

# same NAME [LINE]: NAME's output and status are the reference's, and its
# stderr is empty, or the one LINE.
same() {
    name=$1
    cmp -s "$WORK/ref.out" "$WORK/$name.out" ||
        { diff "$WORK/ref.out" "$WORK/$name.out" || true; cat "$WORK/$name.err"; fail "$name: output differs from the run without the agent"; }
    [ "$(cat "$WORK/$name.status")" = "$(cat "$WORK/ref.status")" ] ||
        { cat "$WORK/$name.err"; fail "$name: exit status $(cat "$WORK/$name.status"), without the agent $(cat "$WORK/ref.status")"; }
    if [ -n "${2:-}" ]; then
        [ "$(cat "$WORK/$name.err")" = "$2" ] ||
            { cat "$WORK/$name.err"; fail "$name: stderr is not the one line"; }
    else
        [ ! -s "$WORK/$name.err" ] ||
            { cat "$WORK/$name.err"; fail "$name: the agent wrote on stderr"; }
    fi
    note "$name: same output, status $(cat "$WORK/$name.status")"
}

run ref env -u LD_PRELOAD "$P"
[ "$(cat "$WORK/ref.status")" = 3 ] && [ ! -s "$WORK/ref.err" ] ||
    { cat "$WORK/ref.out" "$WORK/ref.err"; fail "the program fails without the agent"; }

# The agent's definitions are the ones the program calls.
LD_PRELOAD="$AGENT" "$P" where > "$WORK/where" 2>&1 ||
    { cat "$WORK/where"; fail "'where' failed under the agent"; }
bound=$(awk '$2 != "libpprofagent.so"' "$WORK/where")
[ -z "$bound" ] || { cat "$WORK/where"; fail "not interposed: $bound"; }

run off env LD_PRELOAD="$AGENT" PPROF_ENABLE=0 "$P"
same off
run defaults env -u PPROF_ADDR LD_PRELOAD="$AGENT" "$P"
same defaults
rm -f "$WORK/port"
run addr env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_START_DELAY_MS=0 \
    PPROF_PORT_FILE="$WORK/port" "$P"
same addr "$LINE"
[ ! -e "$WORK/port" ] || fail "a port file was written: the agent started a server"
run quiet env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 PPROF_LOG=quiet "$P"
same quiet
run loader env -u LD_PRELOAD "$MUSL_LIBC" --preload "$AGENT" "$P"
same loader

# Statically linked: no loader, LD_PRELOAD does nothing.
musl-gcc -static -std=gnu11 -O1 -D_GNU_SOURCE -pthread \
    "$TOP/test/programs/musl_host.c" -o "$P-static" || fail "musl-gcc -static failed"
run static env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 "$P-static"
same static
echo ok
