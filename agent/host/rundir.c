/*
 * The run directory (PPROF_RUN_DIR): one file per serving process, named
 * pid-<pid>, holding one line "pid ppid starttime program host:port family".
 * It is how the workers of a multi-process service are found: the index page
 * of any of them lists all, and scripts read the folder.
 *
 * The folder is shared by every program of the user, so a listing keeps
 * only this process's family: the first process that loaded the agent and
 * everything descended from it. The family id is that first process's
 * "pid.starttime". A forked child keeps it in memory (a daemon's double fork
 * re-parents it to init, and it stays in the family); an exec'd child gets
 * it from PPROF_FAMILY, which the first process adds to its environment,
 * or, when a program cleaned its children's environment but kept
 * LD_PRELOAD, from its parent's announcement. PPROF_FAMILY is set with the
 * run directory off too: it is also how an exec'd descendant knows it is
 * one (process/children.c: descendants stay passive unless asked).
 *
 * The file is created (empty) as early as possible and its descriptor kept:
 * a forked worker creates it in the fork child handler, while it still has
 * its parent's rights, and fills it once its server listens, which may be
 * after it switched to an unprivileged user (nginx workers do). A reader
 * takes only complete lines. A process's own file is removed at exit; files
 * of processes that are gone (pid dead, or reused: the start time differs)
 * are skipped and removed by whoever lists the folder, a few at a time by
 * each announcement (a host's start must not wait on a folder full of
 * them), and all by the family's first process as it exits after having
 * served (the workers it outlived).
 *
 * Contexts: rundir_reserve() in the constructor's thread or in a fork child
 * handler (system calls only there); publish and list on the agent's
 * threads; rundir_remove() in the exit path, rundir_leave() in the atexit
 * handler. Nothing here takes a lock.
 */
#include "agent/compiler.h"
#include "agent/core/ops.h"
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/host/fds.h"
#include "agent/guard.h"
#include "agent/log.h"
#include "agent/host/proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Files looked at by each announcement to remove those of processes that
 * are gone. */
#define PUBLISH_SCAN_MAX 16

/* This process's file: its path and descriptor (-1: none). Written by the
 * thread that reserves (the only thread, in a fork child), read at exit. */
static char own_path[1100];
static int own_fd = -1;
static int own_pid;
static int reserve_logged;
/* This process's start time and name, read when its file is reserved: a
 * process that then chroots (HAProxy's worker) announces itself with
 * them, /proc being out of its reach. For own_pid. */
static unsigned long long own_started;
static char own_program[64];

/* This process's family id; set once by rundir_family_init() in the
 * constructor, inherited by forked children, read by listings. */
static char own_family[RUNDIR_FAMILY_MAX];
/* 1 when it came from an ancestor (PPROF_FAMILY naming another process,
 * or the parent's announcement): this process was exec'd by one under the
 * agent. A process keeps its own family across its own exec (a wrapper
 * that execs the real program, as env, nice or a shell's exec do). */
static int family_inherited;

/* Start time of pid in clock ticks since boot (field 22 of its stat), which
 * tells a live process from a later one that reuses the pid. 0 when gone
 * or a zombie. */
static unsigned long long start_time(int pid)
{
    return proc_stat_field(pid, 22);
}

/* glibc 2.32's word, 1 until a second thread was created; weak, so that
 * a C library without it (musl's: the agent stands aside there) does not
 * refuse to load the agent. */
extern char __libc_single_threaded __attribute__((weak));

/* This process's own start time, read once per process: the constructor
 * asks for it up to twice (its family id, the time it lived before an
 * exec in place), and a read of /proc in every process started by hand
 * is what a short one must not pay thrice. */
static unsigned long long self_ticks;
static int self_ticks_pid;

static unsigned long long self_start_time(void)
{
    int pid = (int)getpid();
    if (self_ticks_pid != pid || self_ticks == 0) {
        self_ticks = start_time(pid);
        self_ticks_pid = pid;
    }
    return self_ticks;
}

void rundir_program(char *out, size_t size)
{
    char buf[64];
    ssize_t n = proc_read("/proc/self/comm", buf, sizeof buf);
    if (n <= 0) {
        log_snprintf(out, size, "unknown");
        return;
    }
    size_t j = 0;
    for (int i = 0; i < n && buf[i] != '\n' && j + 1 < size; i++)
        out[j++] = (buf[i] == ' ' || buf[i] < ' ') ? '_' : buf[i];
    out[j] = '\0';
}

int rundir_reserve(void)
{
    if (!opt_run_dir[0])
        return -ENOENT;
    if (own_fd >= 0)
        fds_close(own_fd);
    own_fd = -1;
    own_pid = (int)getpid();
    if (mkdir(opt_run_dir, 0700) != 0 && errno != EEXIST)
        goto fail;
    /* The default folder is in /tmp for most users: someone else may have
     * made it first. Use it only when it is a real folder of our own that
     * nobody else can write to. */
    struct stat st;
    if (lstat(opt_run_dir, &st) != 0)
        goto fail;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & (S_IWGRP | S_IWOTH))) {
        errno = EPERM;
        goto fail;
    }
    log_snprintf(own_path, sizeof own_path, "%s/pid-%d", opt_run_dir, own_pid);
    own_started = start_time(own_pid);
    rundir_program(own_program, sizeof own_program);
    /* Held: the number is rewritten if the program's dup2 targets it. */
    fds_begin();
    own_fd = fds_adopt(open(own_path, O_WRONLY | O_CREAT | O_TRUNC |
                                          O_NOFOLLOW | O_CLOEXEC,
                            0644),
                       FDS_HELD, &own_fd);
    fds_end();
    if (own_fd < 0)
        goto fail;
    return 0;
fail:;
    int err = errno;
    if (!reserve_logged++)
        log_info("cannot announce this process in PPROF_RUN_DIR %s: %s",
                 opt_run_dir,
                 err == EPERM ? "not a folder of this user's that only it "
                                "can write to"
                              : log_errtext(err));
    own_path[0] = '\0';
    return -err;
}

/* Parses one announcement; 0 or -EINVAL (incomplete or not ours). */
static int parse_entry(const char *buf, struct rundir_entry *e,
                       unsigned long long *started)
{
    const char *nl = strchr(buf, '\n');
    if (!nl)
        return -EINVAL;
    char line[384];
    if (config_copy_prefix(line, sizeof line, buf, (size_t)(nl - buf)) != 0)
        return -EINVAL;
    char *save = NULL;
    char *f[7];
    int nf = 0;
    for (char *t = strtok_r(line, " ", &save); t && nf < 7;
         t = strtok_r(NULL, " ", &save))
        f[nf++] = t;
    long pid, ppid;
    /* Five fields: written by an agent that knew no families. */
    if ((nf != 5 && nf != 6) ||
        config_parse_long(f[0], 1, 0x7fffffff, &pid) != 0 ||
        config_parse_long(f[1], 0, 0x7fffffff, &ppid) != 0)
        return -EINVAL;
    e->pid = (int)pid;
    e->ppid = (int)ppid;
    *started = strtoull(f[2], NULL, 10);
    log_snprintf(e->program, sizeof e->program, "%s", f[3]);
    log_snprintf(e->addr, sizeof e->addr, "%s", f[4]);
    log_snprintf(e->family, sizeof e->family, "%s", nf == 6 ? f[5] : "");
    return 0;
}

/* Reads every file (at most limit - 1 when limit > 0); live entries of
 * this process's family go to fn, dead ones (of any family) are removed
 * when collect is set (files this process cannot remove stay, skipped).
 * Returns the number of live entries of the family. */
static size_t scan(void (*fn)(void *arg, const struct rundir_entry *e),
                   void *arg, int collect, int limit)
{
    if (!opt_run_dir[0])
        return 0;
    DIR *d = fds_opendir(opt_run_dir);
    if (!d)
        return 0;
    size_t live = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "pid-", 4) != 0)
            continue;
        if (limit > 0 && --limit == 0)
            break;
        char path[1400], buf[512];
        log_snprintf(path, sizeof path, "%s/%s", opt_run_dir, de->d_name);
        struct rundir_entry e;
        unsigned long long started;
        long pid;
        if (config_parse_long(de->d_name + 4, 1, 0x7fffffff, &pid) != 0)
            continue;
        ssize_t n = proc_read(path, buf, sizeof buf);
        int ok = n > 0 && parse_entry(buf, &e, &started) == 0 &&
                 e.pid == (int)pid;
        unsigned long long now = start_time((int)pid);
        if (now == 0 || (ok && now != started)) {
            /* Gone, or a later process reused the pid. An empty file of a
             * live process is a worker still starting: keep it. */
            if (collect)
                unlink(path);
            continue;
        }
        if (!ok || strcmp(e.family, own_family) != 0)
            continue;
        live++;
        if (fn)
            fn(arg, &e);
    }
    fds_closedir(d);
    return live;
}

int rundir_publish(const char *addr)
{
    /* A file lost behind the agent's back is not written to. */
    if (own_fd >= 0 && own_pid == (int)getpid() && fds_check(own_fd) != 0)
        own_fd = -1;
    if (own_fd < 0 || own_pid != (int)getpid()) {
        int err = rundir_reserve();
        if (err)
            return err;
    }
    char program[64], line[384];
    rundir_program(program, sizeof program);
    unsigned long long started = start_time((int)getpid());
    /* Without /proc (chrooted): what was read at the reservation. */
    if (!started)
        started = own_started;
    if (strcmp(program, "unknown") == 0 && own_program[0])
        memcpy(program, own_program, sizeof program);
    size_t n = log_snprintf(line, sizeof line, "%d %d %llu %s %s %s\n",
                            (int)getpid(), (int)getppid(), started, program,
                            addr, own_family);
    ssize_t w = real_pwrite(own_fd, line, n, 0);
    int err = w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
    if (err)
        log_info("cannot announce this process in %s: %s", own_path,
                 log_errtext(-err));
    /* A few files of processes that are gone (forked children that ended
     * before serving leave theirs) go with each announcement; a listing
     * removes the rest. Bounded: this runs in the host's constructor. */
    scan(NULL, NULL, 1, PUBLISH_SCAN_MAX);
    return err;
}

void rundir_adopt(void)
{
    if (!opt_run_dir[0] || own_path[0])
        return;
    char path[sizeof own_path];
    log_snprintf(path, sizeof path, "%s/pid-%d", opt_run_dir, (int)getpid());
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid())
        return;
    memcpy(own_path, path, sizeof own_path);
    own_pid = (int)getpid();
}

COMMON_PATH void rundir_remove(void)
{
    /* Only the process that reserved the file removes it: a forked child
     * that never reserved its own must not remove its parent's. A process
     * that sandboxed itself may be killed for an unlink (sshd's
     * pre-authentication child): its file stays, and the next listing or
     * announcement removes it (its pid is gone). */
    if (own_path[0] && !agent_sandboxed && own_pid == (int)getpid())
        unlink(own_path);
}

/* 1 when this process is its family's first: the family id is its own
 * pid (and start time), not one it inherited. */
static int family_first(void)
{
    char head[24];
    size_t n = log_snprintf(head, sizeof head, "%d.", (int)getpid());
    return !family_inherited && strncmp(own_family, head, n) == 0;
}

COMMON_PATH void rundir_leave(void)
{
    int announced = own_path[0] && own_pid == (int)getpid();
    rundir_remove();
    /* A worker that switched to an unprivileged user cannot remove its
     * file from a root's folder (nginx's), nor can one that was killed or
     * chrooted: the first process, stopping after its workers, takes
     * them, so that a stopped service leaves nothing. */
    if (announced && !agent_sandboxed && family_first())
        scan(NULL, NULL, 1, 0);
}

size_t rundir_list(void (*fn)(void *arg, const struct rundir_entry *e),
                   void *arg)
{
    return scan(fn, arg, 1, 0);
}

/* 1 when s can be a family id: 1 to RUNDIR_FAMILY_MAX - 1 characters of
 * [A-Za-z0-9._-] (it is one field of an announcement line). */
STARTUP static int family_valid(const char *s)
{
    size_t n = 0;
    for (char c = s[0]; (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                        c == '-';
         c = s[++n])
        ;
    return n > 0 && s[n] == '\0' && n < RUNDIR_FAMILY_MAX;
}

/* The number of decimal digits s starts with. The two loops here, not
 * strspn: rundir_env_from_ancestor runs in every exec'd process, where
 * strspn was a lazy binding and a page of the C library's code more than
 * a process without the agent pays. */
STARTUP static size_t digits_at(const char *s)
{
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    return n;
}

/* The family of the parent, from its announcement: "" when it has none
 * (not announced, gone, or pid reused). */
static void parent_family(char *out, size_t size)
{
    char path[1100], buf[512];
    struct rundir_entry e;
    unsigned long long started;
    int ppid = (int)getppid();
    out[0] = '\0';
    log_snprintf(path, sizeof path, "%s/pid-%d", opt_run_dir, ppid);
    if (ppid > 1 && proc_read(path, buf, sizeof buf) > 0 &&
        parse_entry(buf, &e, &started) == 0 && e.pid == ppid &&
        started == start_time(ppid) && family_valid(e.family))
        log_snprintf(out, size, "%s", e.family);
}

STARTUP int rundir_env_from_ancestor(void)
{
    const char *s = config_env("PPROF_FAMILY");
    /* Only an id the agent made ("pid.starttime"): a family of the
     * operator's own names no process, and every process started with it
     * is one started by hand; a bad value starts a family, with a line. */
    size_t digits = digits_at(s ? s : "");
    if (!s || !family_valid(s) || digits == 0 || s[digits] != '.' ||
        s[digits + 1 + digits_at(s + digits + 1)] != '\0')
        return 0;
    /* The pid first: a start time is read only when it is this one's. */
    char own[RUNDIR_FAMILY_MAX];
    int pid = (int)getpid();
    size_t n = log_snprintf(own, sizeof own, "%d.", pid);
    if (strncmp(s, own, n) != 0)
        return 1;
    log_snprintf(own, sizeof own, "%d.%llu", pid, self_start_time());
    return strcmp(s, own) != 0;
}

STARTUP int rundir_env_own(int64_t *lived_ns)
{
    const char *s = config_env("PPROF_FAMILY");
    char own[RUNDIR_FAMILY_MAX];
    int pid = (int)getpid();
    size_t n = log_snprintf(own, sizeof own, "%d.", pid);
    if (!s || strncmp(s, own, n) != 0)
        return 0; /* the pid first: the start time only when it matches */
    unsigned long long ticks = self_start_time();
    log_snprintf(own, sizeof own, "%d.%llu", pid, ticks);
    struct timespec boot;
    long hz = sysconf(_SC_CLK_TCK);
    if (ticks == 0 || strcmp(s, own) != 0 || hz <= 0 ||
        clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
        return 0;
    /* The start time counts clock ticks since boot, as CLOCK_BOOTTIME. */
    int64_t since_boot =
        (int64_t)(ticks / (unsigned long long)hz) * 1000000000LL +
        (int64_t)(ticks % (unsigned long long)hz) * (1000000000LL / hz);
    int64_t lived = (int64_t)boot.tv_sec * 1000000000LL + boot.tv_nsec -
                    since_boot;
    *lived_ns = lived > 0 ? lived : 0;
    return 1;
}

void rundir_family_init(void)
{
    const char *s = config_env("PPROF_FAMILY");
    if (s && family_valid(s)) {
        log_snprintf(own_family, sizeof own_family, "%s", s);
        family_inherited = rundir_env_from_ancestor();
        return;
    }
    if (s && s[0]) {
        char shown[RUNDIR_FAMILY_MAX];
        log_snprintf(shown, sizeof shown, "%s", s);
        log_info("PPROF_FAMILY=\"%s\" is not a family id (up to %d "
                 "characters of A-Z a-z 0-9 . _ -); starting a new family",
                 shown, (int)RUNDIR_FAMILY_MAX - 1);
    }
    if (opt_run_dir[0])
        parent_family(own_family, sizeof own_family);
    family_inherited = own_family[0] != '\0';
    if (!own_family[0])
        log_snprintf(own_family, sizeof own_family, "%d.%llu", (int)getpid(),
                     self_start_time());
    /* Handed down to exec'd descendants with the environment. Under
     * LD_PRELOAD the constructor runs before main(), on the only thread;
     * loaded by dlopen into a process with threads, changing the
     * environment could race with their getenv(): exec'd children then
     * find the family through this process's announcement instead. An
     * attached agent never changes the host's environment. */
    if (!config_attached && &__libc_single_threaded && __libc_single_threaded)
        setenv("PPROF_FAMILY", own_family, 1);
}

const char *rundir_family(void)
{
    return own_family;
}

int rundir_family_inherited(void)
{
    return family_inherited;
}
