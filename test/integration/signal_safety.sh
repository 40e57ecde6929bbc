# The files whose code runs in signal handlers (the CPU sampler, the threads
# profile, the signal-context unwinder, the wall profile's timer handler, the dump signal) call nothing outside this list:
# async-signal-safe C-library functions, the table-driven walker
# (agent/stacks/cfi_walk.c: plain reads of its tables and the stack) and the
# agent's own functions
# documented "Async-signal-safe" (real_syscall and real_write among them:
# agent/core/real.h, resolved before main). A new call there fails this test until
# it is checked and added.
. "$TOP/test/integration/lib.sh"

allowed='^(_GLOBAL_OFFSET_TABLE_|__errno_location|clock_gettime|getpid|syscall|write|real_syscall|real_write|agent_tls|cpu_active|cpu_perf_fds|cpu_perf_user_only|cpu_period_ns|agent_sandboxed|cpu_ringbuf_claim|cpu_ringbuf_commit|labels_current|stack_unwind_signal|stack_self_start|stack_self_end|stack_foreign|stack_foreign_n|stack_sigreturn_at|stack_go_g_at|stack_signal_outer|cfi_walk|cfi_walk_sites|cfi_stack_lo|cfi_stack_hi|cfi_current|cfi_epoch|cfi_readers|cfi_tables_stale|cfi_walk_counters|cfi_parse_lookup|agent_find_object|cpu_phdr_readers|cpu_phdr_busy|signals_forward|memset|memcpy|memcmp|strnlen|log_msg)$'
# no_plt OBJ: OBJ calls no C-library function through a PLT stub.
no_plt() {
    libc=$(nm -u "$BUILD/$1.o" | awk '{print $2}' | grep -Ev '^(_GLOBAL_OFFSET_TABLE_|agent_tls|cpu_active|opt_log_level|labels_current|stack_|cfi_|agent_find_object|cpu_phdr_|cpu_ringbuf_|signals_forward|log_msg)' || true)
    for f in $libc; do
        objdump -dr "$BUILD/$1.o" | grep -q "R_X86_64_PLT32[[:space:]]*$f-" &&
            fail "$1 calls $f through the PLT (compile it with -fno-plt: Makefile SIGNAL_OBJS)"
    done
    return 0
}
for o in agent/cpu/cpu_signal agent/threads/threads_signal agent/stacks/stack_signal \
         agent/stacks/cfi_walk agent/stacks/cfi_parse process/dump_signal \
         agent/wall/wall_signal agent/host/signals_forward; do
    obj="$BUILD/$o.o"
    [ -f "$obj" ] || fail "$obj is missing"
    calls=$(nm -u "$obj" | awk '{print $2}')
    note "$o: $(echo $calls)"
    bad=$(printf '%s\n' "$calls" | grep -Ev "$allowed" || true)
    [ -z "$bad" ] || fail "$o calls what is not known to be async-signal-safe: $bad"
    grep -q 'PPROF_SIGNAL_SAFE' "$TOP/$o.c" || fail "$o.c does not mark its signal-context code"
    no_plt "$o"
done
no_plt agent/core/log # log_msg
no_plt agent/core/next_symbol # an interposer's first call, in a host's handler
# The agent binds lazily: no call of the C library from these files may go
# through a PLT stub (the first call would run the loader's resolver in the
# handler). -fno-plt (Makefile SIGNAL_OBJS) makes them GOT calls, bound at
# load time.
if readelf -d "$AGENT" | grep -q 'BIND_NOW'; then
    note "the agent is linked with -z now (LDFLAGS): everything binds at load"
fi
echo ok
