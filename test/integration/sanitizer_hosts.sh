# Programs built with a sanitizer run under the agent as without it.
# test/programs/sanitizer_host is built here with -fsanitize=address,
# thread, undefined and leak, with gcc (the sanitizer's runtime a shared
# library) and with clang when present (the runtime linked into the
# program), and run without the agent, with the agent alone in LD_PRELOAD,
# and (gcc) with the runtime preloaded first, then the agent.
# - Each run has the output, the status and the sanitizer's messages of the
#   run without the agent. The exception is the order ASan refuses (gcc,
#   the agent alone in LD_PRELOAD: its runtime must come first): its own
#   message and status 1, and nothing else. ASan's start-up calls
#   dl_iterate_phdr; the agent's interposer looked the C library's up with
#   code that called strcmp, ASan's interceptor, whose forward was still
#   NULL: every build with -fsanitize=address died of SIGSEGV, silently.
#   TSan's pthread_create comes before the agent's when it is linked in
#   (clang) or preloaded first: the agent's start of a new thread ran
#   before TSan's own and faulted in TSan's allocator; and the agent's
#   condition waits went past TSan to the C library, which TSan reported
#   as a double lock of the agent's mutex.
# - A run that lives past the start delay serves: the index answers, a CPU
#   profile holds sanitizer_busy, and no sanitizer reports anything.
# - The agent's symbol lookup (next_symbol.o), which runs inside other
#   libraries' start-up, calls no function a sanitizer's runtime defines.
. "$TOP/test/integration/lib.sh"

SRC="$TOP/test/programs/sanitizer_host.c"
export PPROF_START_DELAY_MS=200
# The sanitizers' own checks stay on; a sanitizer's exit code is its
# default (1, or 66 for TSan), which the runs compare.
export ASAN_OPTIONS=detect_leaks=1 TSAN_OPTIONS=halt_on_error=0

# Every name the sanitizers' runtimes define that the C library defines too.
intercepted="$WORK/intercepted"
for rt in $(ls /usr/lib/*-linux-gnu/lib[atlu]*san.so.* 2>/dev/null | grep -E '/lib(a|t|l|ub)san\.so\.[0-9]+$'); do
    nm -D --defined-only "$rt" | awk '{print $3}' | sed 's/@.*//'
done | sort -u > "$intercepted.rt"
libc=$(ldd "$BUILD/test/programs/sanitizer_host" | awk '/libc\.so/ {print $3}')
nm -D --defined-only "$libc" | awk '{print $3}' | sed 's/@.*//' | sort -u > "$intercepted.libc"
comm -12 "$intercepted.rt" "$intercepted.libc" > "$intercepted"
[ -s "$intercepted" ] || fail "no sanitizer runtime found (gcc's libasan, libtsan, libubsan, liblsan)"
calls=$(nm -u "$BUILD/agent/core/next_symbol.o" | awk '{print $2}' | sed 's/@.*//' | sort -u | comm -12 - "$intercepted" | tr '\n' ' ')
[ -z "$calls" ] || fail "next_symbol.o calls what a sanitizer intercepts: $calls"
note "next_symbol.o calls: $(nm -u "$BUILD/agent/core/next_symbol.o" | awk '{print $2}' | tr '\n' ' ')"

# run NAME PRELOAD BIN MODE: runs BIN MODE with LD_PRELOAD=PRELOAD (60 s at
# most) into $WORK/NAME.out, .err; sets RC.
run() {
    set +e
    if [ -n "$2" ]; then
        timeout -k 5 60 env LD_PRELOAD="$2" PPROF_ADDR=127.0.0.1:0 "$3" "$4" >"$WORK/$1.out" 2>"$WORK/$1.err"
    else
        timeout -k 5 60 "$3" "$4" >"$WORK/$1.out" 2>"$WORK/$1.err"
    fi
    RC=$?
    set -e
}

# What is not the agent's serving lines: a quick run that lived past the
# start delay (a loaded machine) serves, and says so; with TSan's runtime
# first (or linked in, clang) it also says once that malloc is the
# runtime's (heap_table.c).
agent_lines() {
    grep -v -e '^pprofagent: serving http://127\.0\.0\.1:[0-9]*/debug/pprof/ (pid [0-9]*)$' \
        -e '^pprofagent: malloc in this process is [^ ]*'"'"'s, loaded before the agent: ' "$1" || true
}

# same NAME PRELOAD BIN: the quick run under PRELOAD against the plain one.
same() {
    run "$1.plain" "" "$3" quick; plain=$RC
    run "$1" "$2" "$3" quick
    [ "$RC" = "$plain" ] || { cat "$WORK/$1.err" >&2; fail "$1: status $RC under the agent, $plain without"; }
    cmp -s "$WORK/$1.plain.out" "$WORK/$1.out" || fail "$1: output changed"
    agent_lines "$WORK/$1.err" > "$WORK/$1.err.own"
    cmp -s "$WORK/$1.plain.err" "$WORK/$1.err.own" || { diff "$WORK/$1.plain.err" "$WORK/$1.err" >&2; fail "$1: stderr changed"; }
    note "$1: $(cat "$WORK/$1.out"), status $RC, as without the agent"
}

# serves NAME PRELOAD BIN: the serving run; the index answers, a CPU
# profile holds sanitizer_busy, and SIGTERM ends it with status 3.
serves() {
    pre="$2"
    [ -n "$pre" ] || pre="$AGENT"
    AGENT="$pre" start_agent "$1.serve" "$3" serve
    index=$(fetch debug/pprof/)
    expect_contains "$index" "profile" "$1: the index"
    fetch "debug/pprof/profile?seconds=1" > "$WORK/$1.pb.gz"
    cum=$(top_cum "$(pprof -top -cum -unit=ms "$WORK/$1.pb.gz")" sanitizer_busy)
    [ -n "$cum" ] && awk -v c="$cum" 'BEGIN { exit !(c > 0) }' || fail "$1: no samples of sanitizer_busy"
    kill -TERM "$PID"
    wait_exit "$PID" 60
    [ "$STATUS" = 3 ] || { cat "$WORK/$1.serve.err" >&2; fail "$1: status $STATUS after serving"; }
    # The agent may say what it serves and what its profile lacks (TSan's
    # own thread blocks the profiling signal); no sanitizer may report.
    ! grep -Eq 'Sanitizer|runtime error|SEGV' "$WORK/$1.serve.err" || { cat "$WORK/$1.serve.err" >&2; fail "$1: a sanitizer reported while serving"; }
    note "$1: served (sanitizer_busy $cum ms in a 1 s profile), status 3"
}

ran=0
for cc in gcc clang; do
    command -v "$cc" >/dev/null || { note "no $cc"; continue; }
    for san in address thread undefined leak; do
        bin="$WORK/$cc-$san"
        if ! "$cc" -fsanitize="$san" -g -O1 -fno-omit-frame-pointer -pthread \
            -I"$TOP" "$SRC" -o "$bin" 2>"$WORK/$cc-$san.cc.err"; then
            note "$cc cannot build -fsanitize=$san: $(head -n 1 "$WORK/$cc-$san.cc.err")"
            continue
        fi
        ran=$((ran + 1))
        rt=$(ldd "$bin" | awk '/lib(a|t|l|ub)san\.so/ {print $3}')
        if [ "$san" = address ] && [ -n "$rt" ]; then
            # The agent alone, before the runtime: ASan's refusal, nothing else.
            run "$cc-$san-alone" "$AGENT" "$bin" quick
            [ "$RC" = 1 ] && [ ! -s "$WORK/$cc-$san-alone.out" ] &&
                grep -q 'ASan runtime does not come first' "$WORK/$cc-$san-alone.err" &&
                [ "$(grep -c . "$WORK/$cc-$san-alone.err")" = 1 ] ||
                { cat "$WORK/$cc-$san-alone.err" >&2; fail "$cc-$san-alone: status $RC, not ASan's refusal alone"; }
            note "$cc-$san-alone: ASan's own message, status 1"
        else
            same "$cc-$san-alone" "$AGENT" "$bin"
            serves "$cc-$san-alone" "" "$bin"
        fi
        if [ -n "$rt" ]; then
            same "$cc-$san-first" "$rt $AGENT" "$bin"
            serves "$cc-$san-first" "$rt $AGENT" "$bin"
        fi
    done
done
[ "$ran" -gt 0 ] || fail "no sanitizer build"
echo ok
