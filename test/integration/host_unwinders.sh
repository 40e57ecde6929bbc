# Hosts that unwind for themselves are not disturbed by the agent's own
# unwinder (libunwind, loaded privately by agent/stacks/unwinder.c):
# - a C program using a C++ library: exceptions thrown on four threads,
#   and pthread_exit through a std::lock_guard, go through libgcc as they
#   do without the agent (libunwind's _Unwind_* in the global scope took
#   them over: pthread_exit crashed);
# - a program walking its own stacks with libunwind on four threads: the
#   contention profiler never records libunwind's own locks (recording one
#   needs a stack, which needs that lock: the thread waited on itself).
. "$TOP/test/integration/lib.sh"

if readelf -d "$AGENT" | grep -q 'libunwind'; then
    fail "the agent links libunwind into the host's global scope"
fi

cat > "$WORK/cxxlib.cc" <<'CC'
#include <mutex>
#include <pthread.h>
#include <stdexcept>
static int __attribute__((noinline)) thrower(int d)
{
    if (d == 0)
        throw std::runtime_error("x");
    return thrower(d - 1) + 1;
}
extern "C" long throw_many(long n)
{
    long caught = 0;
    for (long i = 0; i < n; i++) {
        try {
            thrower(6);
        } catch (const std::exception &) {
            caught++;
        }
    }
    return caught;
}
static std::mutex m;
static void finish() { pthread_exit(nullptr); }
extern "C" void *exit_holding(void *)
{
    std::lock_guard<std::mutex> g(m);
    finish();
    return nullptr;
}
extern "C" int take_after(void)
{
    std::lock_guard<std::mutex> g(m);
    return 1;
}
CC
cat > "$WORK/cmain.c" <<'C'
#include <pthread.h>
#include <stdio.h>
long throw_many(long n);
void *exit_holding(void *);
int take_after(void);
static long caught[4];
static void *thrower(void *a) { caught[(long)a] = throw_many(20000); return 0; }
int main(void)
{
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], 0, thrower, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], 0);
    printf("caught %ld %ld %ld %ld\n", caught[0], caught[1], caught[2], caught[3]);
    pthread_t x;
    pthread_create(&x, 0, exit_holding, 0);
    pthread_join(x, 0);
    printf("lock released by pthread_exit: %d\n", take_after());
    return 0;
}
C
cat > "$WORK/selfunwind.c" <<'C'
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <pthread.h>
#include <stdio.h>
static long total[4];
static int __attribute__((noinline)) walk(void)
{
    unw_context_t c;
    unw_cursor_t cur;
    int n = 0;
    unw_getcontext(&c);
    unw_init_local(&cur, &c);
    while (unw_step(&cur) > 0)
        n++;
    return n;
}
static int __attribute__((noinline)) deep(int d) { return d ? deep(d - 1) + 1 : walk(); }
static void *thr(void *a)
{
    for (int i = 0; i < 100000; i++)
        total[(long)a] += deep(i % 8);
    return 0;
}
int main(void)
{
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], 0, thr, (void *)i);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], 0);
    /* Depths differ under the agent (its thread start frame): only
     * whether every thread walked. */
    printf("walked on every thread: %d\n",
           total[0] > 0 && total[1] > 0 && total[2] > 0 && total[3] > 0);
    return 0;
}
C
c++ -O1 -g -shared -fPIC -o "$WORK/libcxxlib.so" "$WORK/cxxlib.cc"
cc -O1 -g -pthread -o "$WORK/cmain" "$WORK/cmain.c" -L"$WORK" -lcxxlib -Wl,-rpath,"$WORK"
cc -O1 -g -pthread -o "$WORK/selfunwind" "$WORK/selfunwind.c" -lunwind

# Which unwinder libstdc++'s throw binds to, under the agent.
env LD_PRELOAD="$AGENT" PPROF_ADDR=off LD_DEBUG=bindings "$WORK/cmain" \
    2> "$WORK/bindings.txt" > /dev/null || true
b=$(grep 'libstdc++.*`_Unwind_RaiseException' "$WORK/bindings.txt" | head -n 1)
note "${b#*binding }"
echo "$b" | grep -q 'to /.*libgcc_s' || fail "libstdc++'s _Unwind_RaiseException: $b"

for prog in cmain selfunwind; do
    "$WORK/$prog" > "$WORK/$prog.plain" || fail "$prog fails without the agent"
    # Serving from the constructor on: these programs may end before the
    # default PPROF_START_DELAY_MS, and the port file is how start_agent
    # knows the agent is up.
    PPROF_START_DELAY_MS=0 start_agent "$prog" "$WORK/$prog"
    wait_exit "$PID" 60
    [ "$STATUS" = 0 ] || { cat "$WORK/$prog.err"; fail "$prog exited with $STATUS under the agent"; }
    cmp -s "$WORK/$prog.plain" "$WORK/$prog.out" ||
        fail "$prog: output changed: $(cat "$WORK/$prog.out")"
    note "$prog: $(tr '\n' ' ' < "$WORK/$prog.out")"
done
echo ok
