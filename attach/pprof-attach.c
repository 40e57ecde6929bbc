/*
 * pprof-attach PID: loads the agent into a running process and returns
 * once it serves, printing the serving line the preloaded agent prints.
 * pprof-attach --detach PID: stops it again. docs/attach.md says how.
 *
 *   pprof-attach [--agent PATH] PID
 *   pprof-attach --detach PID
 *
 * The agent's settings are this command's PPROF_* and OTEL_* variables,
 * handed to the agent with the call; the target's environment is never
 * read.
 *
 * The work on the target (stop, calls, release) is done by a helper
 * process in a session of its own that ignores the signals a terminal or
 * a supervisor sends: pprof-attach killed at any moment, even with
 * SIGKILL, leaves the helper to put the thread back and detach. The
 * helper's own critical stretch is the few milliseconds of the stop.
 */
#include "attach/attach.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AGENT_FILE "libpprofagent.so"
#define RTLD_LAZY_ 1

/* The agent's answers (process/attach.c). */
enum { A_OK, A_PRELOADED, A_ATTACHED, A_LEAVING, A_NOT_ATTACHED,
       A_SETTINGS, A_THREAD };
enum { S_NONE, S_ON, S_LEAVING, S_PRELOADED, S_SERVING, S_FAILED };

/* How long the agent may take to serve, or to stop serving (a profile in
 * flight ends first), on a loaded machine. */
#define WAIT_SERVE_S 60
#define WAIT_DETACH_S 120

extern char **environ;

void say(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pprof-attach: %s\n", line);
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The agent beside this program (a build tree) or in ../lib (installed). */
static int default_agent(char *out, size_t size)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    const char *tries[] = {"/" AGENT_FILE, "/../lib/" AGENT_FILE};
    for (size_t i = 0; i < 2; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s%s", self, tries[i]);
        char *real = realpath(path, NULL);
        if (real) {
            snprintf(out, size, "%s", real);
            free(real);
            return 0;
        }
    }
    return -1;
}

/* This command's PPROF_ and OTEL_ variables, one "NAME=value" a line. */
static char *settings_text(void)
{
    size_t len = 1;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "PPROF_", 6) == 0 || strncmp(*e, "OTEL_", 5) == 0)
            len += strlen(*e) + 1;
    char *s = malloc(len);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (char **e = environ; *e; e++)
        if ((strncmp(*e, "PPROF_", 6) == 0 || strncmp(*e, "OTEL_", 5) == 0) &&
            !strchr(*e, '\n')) {
            strcat(s, *e);
            strcat(s, "\n");
        }
    return s;
}

/* The target can load libraries: a glibc process with its loader. */
static int check_target(pid_t pid, struct mapping *libc)
{
    char state[64];
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        say("no such process: %d", (int)pid);
        return -1;
    }
    if (target_status(pid, "State", state, sizeof state) != 0) {
        say("cannot read /proc/%d/status: %s", (int)pid, strerror(errno));
        return -1;
    }
    if (state[0] == 'Z') {
        say("pid %d is a zombie", (int)pid);
        return -1;
    }
    if (target_maps_contain(pid, "/ld-musl")) {
        say("pid %d is not a glibc process (musl): the agent works with "
            "glibc only", (int)pid);
        return -1;
    }
    int no_libc = target_find_mapping(pid, "libc.so.6", 0, libc) != 0 &&
                  target_find_mapping(pid, "libc-2.", 0, libc) != 0;
    if (no_libc && target_maps_contain(pid, "/ld-linux")) {
        say("pid %d has its dynamic loader mapped but no C library yet: "
            "it is starting a program (an execve just now, as a launcher "
            "script does); attach once it runs", (int)pid);
        return -1;
    }
    if (no_libc) {
        say("pid %d has no C library loaded dynamically (statically linked, "
            "or not a glibc process): nothing in it can load the agent",
            (int)pid);
        return -1;
    }
    return 0;
}

/* Where the target mapped the agent at path; -1 when it did not. */
static int agent_mapping(pid_t pid, const char *path, struct mapping *m)
{
    char reach[4200];
    target_path(pid, path, reach, sizeof reach);
    struct stat st;
    if (stat(reach, &st) != 0)
        return -1;
    return target_find_mapping(pid, NULL, (uint64_t)st.st_ino, m);
}

/* Says why the agent in pid can no longer be reached after the calls: the
 * process ended, or it ran a new program (execve), which drops every
 * mapping, the agent's with them, while the pid lives on; or the agent is
 * there and unreadable. */
static void say_lost(pid_t pid, const char *agent)
{
    int e = errno; /* the failed read's */
    char state[64] = "", exe[4096];
    struct mapping m;
    if ((kill(pid, 0) != 0 && errno == ESRCH) ||
        target_status(pid, "State", state, sizeof state) != 0 ||
        state[0] == 'Z') {
        say("pid %d ended", (int)pid);
        return;
    }
    if (agent_mapping(pid, agent, &m) == 0) {
        say("cannot read the agent's state in pid %d: %s", (int)pid,
            strerror(e));
        return;
    }
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    say("pid %d runs on, but the agent is no longer mapped in it: it ran a "
        "new program (execve; it runs %s now), which drops the old "
        "program's libraries, the agent with them. Attach to it again "
        "once it runs the program to profile", (int)pid, n > 0 ? exe : "?");
}

/* The address of an agent symbol in the target. */
static int agent_symbol(pid_t pid, const char *path, const char *name,
                        uintptr_t *out)
{
    struct mapping m;
    char reach[4200];
    target_path(pid, path, reach, sizeof reach);
    if (agent_mapping(pid, path, &m) != 0) {
        say_lost(pid, path);
        return -1;
    }
    if (elf_symbol_address(reach, &m, name, out) != 0) {
        say("no %s in the agent mapped in pid %d (%s): another version?",
            name, (int)pid, path);
        return -1;
    }
    return 0;
}

static int read_state(pid_t pid, uintptr_t at, int *state)
{
    return peek(pid, at, state, sizeof *state);
}

/* Reads the agent's state every 20 ms while it is `from`, for seconds at
 * most: 0 with *state the one it left for (or still `from`), -1 when it
 * could no longer be read (said). */
static int wait_while(pid_t pid, const char *agent, uintptr_t at, int from,
                      int seconds, int *state)
{
    *state = from;
    for (int i = 0; i < seconds * 50 && *state == from; i++) {
        if (read_state(pid, at, state) != 0) {
            say_lost(pid, agent);
            return -1;
        }
        if (*state == from)
            nap_ms(20);
    }
    return 0;
}


static void explain(int code, pid_t pid)
{
    switch (code) {
    case A_PRELOADED:
        say("the agent is already in pid %d, preloaded (LD_PRELOAD): it "
            "serves as configured there; nothing to attach or detach",
            (int)pid);
        break;
    case A_ATTACHED:
        say("the agent is already attached to pid %d; detach it first "
            "(pprof-attach --detach %d)", (int)pid, (int)pid);
        break;
    case A_LEAVING:
        say("the agent in pid %d is detaching; try again in a moment",
            (int)pid);
        break;
    case A_NOT_ATTACHED:
        say("the agent in pid %d is not attached", (int)pid);
        break;
    case A_SETTINGS:
        say("too many or too long PPROF_ settings");
        break;
    case A_THREAD:
        say("the agent could not create its thread in pid %d", (int)pid);
        break;
    default:
        say("the agent in pid %d answered %d", (int)pid, code);
    }
}

/* The loader is done starting the program and loads nothing now: its
 * _r_debug initialized (r_version) and consistent (r_state 0, at offset
 * 24). Before that the C library may not be relocated yet, and a dlopen
 * there crashes. 1 when it is, or when it cannot be told. */
static int loader_settled(pid_t pid)
{
    struct mapping ld;
    char file[4200];
    uintptr_t at;
    int version, state;
    if (target_find_mapping(pid, "ld-linux", 0, &ld) != 0)
        return 1;
    target_path(pid, ld.path, file, sizeof file);
    if (elf_symbol_address(file, &ld, "_r_debug", &at) != 0)
        return 1;
    if (peek(pid, at, &version, sizeof version) != 0 ||
        peek(pid, at + 24, &state, sizeof state) != 0)
        return 1;
    return version != 0 && state == 0;
}

/* Makes the stopped thread call the agent's fn (pprof_attach_start or
 * pprof_attach_stop) with data as its argument, and reads its answer,
 * which the agent also leaves in pprof_attach_answer (the call's own
 * result is lost on the way back through the signal frame). Returns 0 or
 * -1 (said). */
static int agent_call(struct remote *r, const char *agent, uintptr_t fn,
                      const char *data, size_t size, uint64_t *code)
{
    uintptr_t answer_at;
    int none = -1;
    if (agent_symbol(r->pid, agent, "pprof_attach_answer", &answer_at) != 0 ||
        remote_write(r, answer_at, &none, sizeof none) != 0 ||
        remote_call(r, fn, data ? REMOTE_DATA : 0, 0, data, size, code) != 0)
        return -1;
    int answer;
    if (*code == REMOTE_LOST) {
        if (peek(r->pid, answer_at, &answer, sizeof answer) != 0 ||
            answer < 0) {
            say("the agent in pid %d did not answer the call", (int)r->pid);
            return -1;
        }
        *code = (uint64_t)answer;
    }
    return 0;
}

/* The calls of an attach, on the stopped thread: dlopen (unless the agent
 * is mapped already), then pprof_attach_start. Returns the agent's code,
 * or -1 (said). */
static int attach_calls(struct remote *r, const struct mapping *libc,
                        const char *agent, const char *settings)
{
    pid_t pid = r->pid;
    struct mapping m;
    if (agent_mapping(pid, agent, &m) != 0) {
        if (!loader_settled(pid)) {
            say("pid %d's loader is busy (starting the program after an "
                "execve, or loading a library): nothing called there; "
                "try again in a moment", (int)pid);
            return -1;
        }
        char libc_file[4200];
        target_path(pid, libc->path, libc_file, sizeof libc_file);
        uintptr_t dlopen_at, dlerror_at = 0;
        if (elf_symbol_address(libc_file, libc, "dlopen", &dlopen_at) != 0) {
            say("pid %d's C library (%s) has no dlopen: glibc older than "
                "2.34 is not supported yet", (int)pid, libc->path);
            return -1;
        }
        elf_symbol_address(libc_file, libc, "dlerror", &dlerror_at);
        uint64_t handle;
        if (remote_call(r, dlopen_at, REMOTE_DATA, RTLD_LAZY_, agent,
                        strlen(agent) + 1, &handle) != 0)
            return -1;
        if (handle == REMOTE_LOST)
            handle = agent_mapping(pid, agent, &m) == 0;
        if (handle == 0) {
            char why[512] = "?";
            uint64_t text;
            /* The one call whose result is needed, made only after a
             * failed dlopen: it returns to address 0 (attach.h). */
            if (dlerror_at &&
                remote_call_value(r, dlerror_at, 0, 0, NULL, 0, &text) == 0 &&
                text)
                remote_read(r, (uintptr_t)text, why, sizeof why);
            char seccomp[16] = "";
            target_status(pid, "Seccomp", seccomp, sizeof seccomp);
            say("pid %d could not load the agent: %s%s", (int)pid, why,
                strcmp(seccomp, "2") == 0
                    ? " (a seccomp filter is active there: it may forbid "
                      "opening or mapping the file)"
                    : "");
            return -1;
        }
    }
    uintptr_t start_at;
    if (agent_symbol(pid, agent, "pprof_attach_start", &start_at) != 0)
        return -1;
    uint64_t code;
    if (agent_call(r, agent, start_at, settings, strlen(settings) + 1,
                   &code) != 0)
        return -1;
    return (int)code;
}

static void say_stopped(const struct remote *r, const char *what)
{
    fprintf(stderr, "pprof-attach: %s pid %d; thread %d stopped %.1f ms",
            what, (int)r->pid, (int)r->tid, (double)r->stopped_ns / 1e6);
    if (r->stops > 1)
        fprintf(stderr, " (found outside its allocator at stop %d)",
                r->stops);
    fputc('\n', stderr);
}

static int do_attach(pid_t pid, const char *agent)
{
    struct mapping libc;
    if (check_target(pid, &libc) != 0)
        return 1;
    char reach[4200];
    target_path(pid, agent, reach, sizeof reach);
    if (access(reach, R_OK) != 0) {
        say("%s is not reachable from pid %d's root (%s): a container? "
            "Put the agent where the target sees it at the same path, and "
            "pass --agent", agent, (int)pid, reach);
        return 1;
    }
    /* Another copy of the agent (another path, another version) already
     * there: a second one would serve beside it. */
    struct mapping ours, other;
    if (target_find_mapping(pid, "libpprofagent", 0, &other) == 0 &&
        (agent_mapping(pid, agent, &ours) != 0 || ours.inode != other.inode)) {
        say("another agent is already loaded in pid %d (%s): preloaded, or "
            "attached from another path; use it, or --agent %s",
            (int)pid, other.path, other.path);
        return 1;
    }
    char *settings = settings_text();
    if (!settings)
        return 1;
    pid_t tid = target_thread(pid);
    struct remote r;
    if (tid < 0) {
        say("no thread of pid %d to make the call", (int)pid);
        return 1;
    }
    struct safe_ranges unsafe;
    if (safe_ranges_read(pid, &unsafe) != 0 ||
        remote_stop(&r, pid, tid, safe_point, &unsafe) != 0)
        return 1;
    int code = attach_calls(&r, &libc, agent, settings);
    remote_release(&r);
    free(settings);
    if (code != A_OK) {
        if (code > 0)
            explain(code, pid);
        return 1;
    }
    say_stopped(&r, "attached to");
    uintptr_t state_at, addr_at;
    if (agent_symbol(pid, agent, "pprof_attach_state", &state_at) != 0 ||
        agent_symbol(pid, agent, "pprof_attach_address", &addr_at) != 0)
        return 1;
    int state;
    if (wait_while(pid, agent, state_at, S_ON, WAIT_SERVE_S, &state) != 0)
        return 1;
    if (state == S_FAILED) {
        say("the agent in pid %d could not serve (its stderr says why: the "
            "address in use?); it is detached", (int)pid);
        return 1;
    }
    if (state != S_SERVING) {
        say("the agent in pid %d did not serve within %d s", (int)pid,
            WAIT_SERVE_S);
        return 1;
    }
    char addr[256];
    if (peek(pid, addr_at, addr, sizeof addr) != 0) {
        say_lost(pid, agent);
        return 1;
    }
    addr[sizeof addr - 1] = '\0';
    if (addr[0])
        fprintf(stderr, "pprofagent: serving http://%s/debug/pprof/ (pid %d)\n",
                addr, (int)pid);
    else
        say("attached to pid %d, not serving (PPROF_ADDR=off)", (int)pid);
    return 0;
}

static int do_detach(pid_t pid, const char *agent)
{
    struct mapping m;
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        say("no such process: %d", (int)pid);
        return 1;
    }
    if (agent_mapping(pid, agent, &m) != 0) {
        say("the agent (%s) is not loaded in pid %d", agent, (int)pid);
        return 1;
    }
    uintptr_t stop_at, state_at;
    if (agent_symbol(pid, agent, "pprof_attach_stop", &stop_at) != 0 ||
        agent_symbol(pid, agent, "pprof_attach_state", &state_at) != 0)
        return 1;
    pid_t tid = target_thread(pid);
    struct remote r;
    struct safe_ranges unsafe;
    if (tid < 0 || safe_ranges_read(pid, &unsafe) != 0 ||
        remote_stop(&r, pid, tid, safe_point, &unsafe) != 0)
        return 1;
    uint64_t code = (uint64_t)-1;
    int err = agent_call(&r, agent, stop_at, NULL, 0, &code);
    remote_release(&r);
    if (err != 0)
        return 1;
    if (code != A_OK) {
        explain((int)code, pid);
        return 1;
    }
    int state;
    if (wait_while(pid, agent, state_at, S_LEAVING, WAIT_DETACH_S, &state) != 0)
        return 1;
    if (state != S_NONE) {
        say("the agent in pid %d did not stop within %d s", (int)pid,
            WAIT_DETACH_S);
        return 1;
    }
    say_stopped(&r, "detached from");
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: pprof-attach [--agent PATH] PID\n"
                    "       pprof-attach [--agent PATH] --detach PID\n");
    exit(2);
}

/* The helper: in a session of its own, deaf to the signals a terminal or
 * a supervisor sends, so that it finishes what it started on the target
 * even when pprof-attach is killed. */
static void become_helper(void)
{
    setsid();
    int deaf[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP,
                  SIGTTIN, SIGTTOU};
    for (size_t i = 0; i < sizeof deaf / sizeof deaf[0]; i++)
        signal(deaf[i], SIG_IGN);
}

int main(int argc, char **argv)
{
    int detach = 0;
    char agent[4096] = "";
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--detach") == 0)
            detach = 1;
        else if (strcmp(argv[i], "--agent") == 0 && i + 1 < argc)
            snprintf(agent, sizeof agent, "%s", argv[++i]);
        else
            usage();
    }
    if (i != argc - 1)
        usage();
    char *end;
    long pid = strtol(argv[i], &end, 10);
    if (*end || pid <= 0)
        usage();
    if (!agent[0] && default_agent(agent, sizeof agent) != 0) {
        say("cannot find %s beside this program or in ../lib; pass --agent",
            AGENT_FILE);
        return 1;
    }
    if (agent[0] != '/') {
        say("--agent needs an absolute path (the target resolves it)");
        return 2;
    }
    fflush(NULL);
    pid_t helper = fork();
    if (helper < 0) {
        say("fork: %s", strerror(errno));
        return 1;
    }
    if (helper == 0) {
        become_helper();
        _exit(detach ? do_detach((pid_t)pid, agent)
                     : do_attach((pid_t)pid, agent));
    }
    int st;
    while (waitpid(helper, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
