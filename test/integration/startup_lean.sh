# What a short-lived process under the agent no longer pays at its start
# (test/bench/short_lived.sh measures the cost; this checks the causes,
# from the system calls of /bin/true under the agent, default settings):
# - the agent's compression and ELF libraries (libdw, libelf, libz,
#   liblzma, libbz2) and libm are not loaded: the agent loads libdw with a
#   handle of its own at its first profile (agent/core/libs.c);
# - /proc/self/maps is not read (the main thread's stack bounds come from
#   the top of its initial stack);
# - no thread of the agent's gets a malloc arena (the start record's free
#   on the new thread made glibc reserve 128 MiB for it);
# - a shell script's commands create no thread of the agent's: the shell
#   forks (bash) or vforks (dash) each, and it execs or exits at once
#   (agent/core/arm.c);
#   while a process that lives on and waits is still served.
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
for sh in bash dash; do
    command -v $sh > /dev/null || continue
    strace -f -e trace=clone,clone3,prctl,rt_sigprocmask -o "$WORK/$sh.strace" \
        env LD_PRELOAD="$AGENT" PPROF_ADDR=127.0.0.1:0 \
        $sh -c '/bin/true; (/bin/true); x=$(echo 1); echo $x | cat > /dev/null'
    # The script's own shell, started by hand, waits for its commands:
    # it may create the agent's one thread (it would serve, were the
    # script long). Its forked children, which exec or exit, never do.
    head=$(head -n 1 "$WORK/$sh.strace" | cut -d' ' -f1)
    threads=$(grep -E 'clone3?\(.*CLONE_THREAD' "$WORK/$sh.strace" | grep -v "^$head " || true)
    [ -z "$threads" ] || fail "$sh script: the agent created threads in its commands: $threads"
    procs=$(grep -cE '^[0-9]+ +(clone|clone3|vfork)\(' "$WORK/$sh.strace" || true)
    extra=$(grep -E 'PR_GET_TID_ADDRESS' "$WORK/$sh.strace" | grep -v "^$head " || true)
    [ -z "$extra" ] || fail "$sh script: the agent's start-up calls: $extra"
    note "$sh script: $procs processes, no thread of the agent's"
done
# A process that waits past the delay is served (the shell waits for its
# child, the child sleeps).
export PPROF_START_DELAY_MS=200
start_agent waits sh -c 'sleep 30; true'
note "a shell waiting for its child serves: $ADDR"
echo ok
