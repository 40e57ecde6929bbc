# What a short-lived process under the agent no longer pays at its start
# (test/bench/short_lived.sh measures the cost; this checks the causes,
# from the system calls of /bin/true under the agent, default settings):
# - the agent's compression and ELF libraries (libdw, libelf, libz,
#   liblzma, libbz2) and libm are not loaded: the agent loads libdw with a
#   handle of its own at its first profile (agent/core/libs.c);
# - /proc/self/maps is not read (the main thread's stack bounds come from
#   the top of its initial stack);
# - no thread of the agent's gets a malloc arena (the start record's free
#   on the new thread made glibc reserve 128 MiB for it).
. "$TOP/test/integration/lib.sh"

command -v strace > /dev/null || fail "strace is not installed (scripts/install-deps)"
strace -f -e trace=openat,mmap -o "$WORK/true.strace" \
    env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 /bin/true
# env and /bin/true both run under the agent: every line counts.
lines=$(cat "$WORK/true.strace")
libs=$(printf '%s\n' "$lines" | grep -E 'openat\(.*/(libdw|libelf|libz|liblzma|libbz2|libm)\.so' || true)
[ -z "$libs" ] || fail "libraries loaded at start: $libs"
maps=$(printf '%s\n' "$lines" | grep 'openat(.*maps"' || true)
[ -z "$maps" ] || fail "/proc/self/maps read at start: $maps"
arena=$(printf '%s\n' "$lines" | grep 'mmap(NULL, 134217728' || true)
[ -z "$arena" ] || fail "a malloc arena reserved at start: $arena"
note "$(grep -c openat "$WORK/true.strace") openat, $(grep -c mmap "$WORK/true.strace") mmap in env and /bin/true"
echo ok
