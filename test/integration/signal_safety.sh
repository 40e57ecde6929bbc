# The files whose code runs in signal handlers (the CPU sampler, the threads
# profile, the signal-context unwinder) call nothing outside this list:
# async-signal-safe C-library functions, libunwind's local unwinder through
# the agent's private handle (`unwinder`, made safe by the program-header
# cache) and the agent's own functions
# documented "Async-signal-safe". A new call there fails this test until
# it is checked and added. pthread_setcancelstate (the guard keeps the
# unwinder's read() of its validation pipe from acting on a cancel pending
# on the interrupted thread) is not on POSIX's list; glibc's is a
# compare-and-swap loop on the calling thread's own descriptor.
. "$TOP/test/integration/lib.sh"

allowed='^(_GLOBAL_OFFSET_TABLE_|__errno_location|clock_gettime|getpid|syscall|write|unwinder|agent_tls|cpu_active|cpu_in_handler|cpu_phdr_busy|cpu_phdr_readers|cpu_ringbuf_claim|cpu_ringbuf_commit|labels_current|pthread_setcancelstate|stack_unwind_signal|stack_unwinders|stack_unwind_closed|log_msg)$'
for o in agent/cpu_signal agent/threads_signal agent/stack_signal; do
    obj="$BUILD/$o.o"
    [ -f "$obj" ] || fail "$obj is missing"
    calls=$(nm -u "$obj" | awk '{print $2}')
    note "$o: $(echo $calls)"
    bad=$(printf '%s\n' "$calls" | grep -Ev "$allowed" || true)
    [ -z "$bad" ] || fail "$o calls what is not known to be async-signal-safe: $bad"
    grep -q 'PPROF_SIGNAL_SAFE' "$TOP/$o.c" || fail "$o.c does not mark its signal-context code"
done
echo ok
