/*
 * A host that probes for seccomp as Firefox does, for
 * test/integration/seccomp_probe.sh. Each probe asks for a filter with a
 * NULL program, which the kernel refuses (EFAULT) without installing
 * anything: the process is no more sandboxed after them than before.
 *
 *   seccomp_probe probe       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
 *                             NULL) and syscall(SYS_seccomp,
 *                             SECCOMP_SET_MODE_FILTER, TSYNC, NULL) at
 *                             once (within the agent's start delay), prints
 *                             each result, probes through syscall() again
 *                             and again for 600 ms (a probe is in flight
 *                             nearly all that time, whenever the agent's
 *                             waiting thread looks), then spins in
 *                             probe_busy until killed (at most 120 s, then
 *                             exits 0)
 *   seccomp_probe dlopen LIB  dlopens LIB at once: this file built with
 *                             -DPROBE_LIB -shared, whose constructor makes
 *                             the prctl probe under the loader's lock, as
 *                             Firefox's sandbox library does; prints, then
 *                             spins in probe_busy as probe does
 *   seccomp_probe allow MS    sleeps MS, installs an allow-all filter with
 *                             syscall(SYS_seccomp, ..., TSYNC, &prog)
 *                             (after PR_SET_NO_NEW_PRIVS), prints, sleeps
 *                             MS more and exits 0
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef PROBE_LIB
/* The library: its constructor probes, nothing else. */
__attribute__((constructor)) static void probe_at_load(void)
{
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL);
}
#else

#include "spin.h"

static void say(const char *what, long ret)
{
    printf("%s: %ld %s\n", what, ret, ret == 0 ? "ok" : strerror(errno));
    fflush(stdout);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The CPU the profile must find, until the process is killed. */
__attribute__((noinline)) static void probe_busy(void)
{
    time_t end = time(NULL) + 120;
    while (time(NULL) < end)
        spin(10000000);
}

static int mode_probe(void)
{
    errno = 0;
    say("prctl probe", prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL));
    errno = 0;
    say("seccomp probe", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                 SECCOMP_FILTER_FLAG_TSYNC, NULL));
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        for (int i = 0; i < 1000; i++)
            syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0L, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 +
                 (now.tv_nsec - start.tv_nsec) / 1000000 < 600);
    probe_busy();
    return 0;
}

static int mode_dlopen(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW);
    printf("dlopen: %s\n", h ? "ok" : dlerror());
    fflush(stdout);
    if (!h)
        return 1;
    probe_busy();
    return 0;
}

static int mode_allow(long ms)
{
    struct sock_filter allow[] = {
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {1, allow};
    sleep_ms(ms);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0) {
        say("no_new_privs", -1);
        return 1;
    }
    say("allow-all filter", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                    SECCOMP_FILTER_FLAG_TSYNC, &prog));
    sleep_ms(ms);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "probe") == 0)
        return mode_probe();
    if (argc >= 3 && strcmp(argv[1], "dlopen") == 0)
        return mode_dlopen(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "allow") == 0)
        return mode_allow(atol(argv[2]));
    fprintf(stderr, "usage: seccomp_probe probe | dlopen LIB | allow MS\n");
    return 2;
}

#endif
