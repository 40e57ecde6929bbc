/*
 * Who exec'd this process (agent/host/rundir.c): an exec'd descendant is
 * told by a PPROF_FAMILY the agent made ("pid.starttime") that names
 * another process; the process itself after an exec in place (a wrapper),
 * an operator's own family and a bad value are not descendants.
 */
#include "harness.h"

#include "agent/core/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* This process's start time (field 22 of /proc/self/stat). */
static unsigned long long own_start_time(void)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    int field = 2;
    for (; p && *p; p++)
        if (*p == ' ' && ++field == 22)
            return strtoull(p + 1, NULL, 10);
    return 0;
}

static int with_family(const char *value)
{
    if (value)
        setenv("PPROF_FAMILY", value, 1);
    else
        unsetenv("PPROF_FAMILY");
    return rundir_env_from_ancestor();
}

TEST(family_of_another_process_is_an_ancestor)
{
    char id[64];
    snprintf(id, sizeof id, "%d.%llu", (int)getpid() + 1, own_start_time());
    expect_int_eq(with_family(id), 1);
    snprintf(id, sizeof id, "%d.%llu", (int)getpid(), own_start_time() + 1);
    expect_int_eq(with_family(id), 1); /* this pid, an earlier process */
}

TEST(own_family_and_others_are_not)
{
    char id[64];
    snprintf(id, sizeof id, "%d.%llu", (int)getpid(), own_start_time());
    expect_int_eq(with_family(id), 0); /* exec'd in place: the same process */
    expect_int_eq(with_family(NULL), 0);
    expect_int_eq(with_family(""), 0);
    expect_int_eq(with_family("web"), 0);      /* an operator's family */
    expect_int_eq(with_family("web.1"), 0);
    expect_int_eq(with_family("12.x"), 0);
    expect_int_eq(with_family("x y"), 0);      /* a bad value */
}

int main(void)
{
    return run_tests(family_of_another_process_is_an_ancestor,
                     own_family_and_others_are_not, NULL);
}
