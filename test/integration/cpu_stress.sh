# The sampler at 1000 Hz against the worst places to land: a thread that
# dlopen()s and dlclose()s a plugin in a loop (and runs its code), one that
# mallocs and frees, one that forks, two that burn CPU. Nothing may
# deadlock or crash: every loop keeps progressing during the profile, the
# profile names the burners and the program exits normally.
. "$TOP/test/integration/lib.sh"

cat > "$WORK/plug.c" <<'SRC'
static volatile unsigned long plug_sink;
void plug_spin(long n)
{
    unsigned long x = plug_sink;
    for (long i = 0; i < n; i++)
        x = x * 6364136223846793005UL + 1;
    plug_sink = x;
}
SRC
cc -O1 -g -fno-omit-frame-pointer -shared -fPIC -o "$WORK/libplug.so" "$WORK/plug.c"

export PPROF_CPU_HZ=1000
# The host lives well past the profile and its drain (14 s was too few
# on a loaded machine: the response came after the host had ended).
start_agent stress "$BUILD/test/programs/cpu_stress" "$WORK/libplug.so" 24
sleep 1
progress() { tail -n 1 "$WORK/stress.out"; }
p0=$(progress)
fetch 'debug/pprof/profile?seconds=8' > "$WORK/stress.pb.gz"
sleep 1.1
p1=$(progress)
note "progress before: $p0"
note "progress after:  $p1"
field() { printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
for f in dl forks allocs; do
    [ "$(field "$p1" $f)" -gt "$(field "$p0" $f)" ] || fail "$f made no progress during the profile"
done
[ "$(field "$p1" dl)" -gt $(( $(field "$p0" dl) + 100 )) ] || fail "too few dlopen/dlclose rounds"

top=$(pprof -top -nodecount=25 "$WORK/stress.pb.gz")
echo "$top"
expect_contains "$top" "stress_burn"
pprof -comments "$WORK/stress.pb.gz"
samples=$(pprof -top -sample_index=samples -nodecount=1 "$WORK/stress.pb.gz" | sed -n 's/.* of \([0-9]*\) total.*/\1/p' | head -n 1)
ms=$(pprof -top -unit=ms -nodecount=1 "$WORK/stress.pb.gz" | sed -n 's/.* of \([0-9.]*\)ms total.*/\1/p' | head -n 1)
note "1000 Hz asked: $samples samples for $ms ms of CPU"

if wait "$PID"; then status=0; else status=$?; fi
[ "$status" = 0 ] || fail "the stressed host exited with $status"
grep -v '^pprofagent:' "$WORK/stress.err" && fail "the host wrote errors" || true
echo ok
