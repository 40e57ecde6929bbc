/*
 * Configuration: every PPROF_* environment variable, read once by the
 * constructor into opt_* globals, through config_env.
 *
 * A bad value never stops the host: it is reported in one line naming the
 * variable, the value and what is accepted, and the default is used.
 */
#include "agent/compiler.h"
#include "agent/config.h"
#include "agent/locks/deadlock.h"
#include "agent/log.h"
#include "agent/core/ops.h"
#include "agent/core/push.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int opt_enable = 1;
int opt_serve = 1;
char opt_addr[256] = "127.0.0.1:6060";
char opt_addr_shown[256] = "127.0.0.1:6060";
int opt_addr_loopback = 1;
int opt_addr_ipv6;
char opt_port_file[1024];
char opt_token[256];
int opt_log_level = LOG_INFO;
long opt_heap_rate = 524288;
int opt_cpu_hz = 100;
int opt_cpu_sampler = CPU_SAMPLER_TIMER;
/* 20 Hz, async-profiler's default wall interval (50 ms): a thread charged
 * 1,200 times a minute, with 16 looks a tick the sampler's own thread
 * stays near 0.5% of a core (docs/wall.md). */
int opt_wall_hz = 20;
long opt_wall_cost = 9;
char opt_debug_dir[4096];
/* Contention defaults, chosen with test/bench/contention.sh (docs/contention.md,
 * "Defaults, by measurement"): 5 and 10000 ns put the contended benchmark at the
 * 1.03 limit; 20 and 100000 ns keep it near 1.02. */
long opt_mutex_fraction = 20;
long opt_block_rate = 100000;

/* The environment's PPROF_, OTEL_ and XDG_ entries, gathered in one pass
 * when the configuration is read: each of the ~40 settings is then looked
 * for among these few rather than by a getenv through the whole
 * environment, in every process the agent is preloaded into (9,000
 * instructions of a short-lived process's 200,000 before). */
enum { ENV_MAX = 64 };
static const char *env_seen[ENV_MAX] LOAD_STATE;
static int env_count = -1; /* -1: not gathered, ask getenv */
/* The entries config_load_from was handed (the settings pprof-attach
 * brought), or NULL: the environment. Set, they stay the only source of
 * the relevant names: an attached agent never reads the host's. */
static char *const *env_source;
int config_attached;

static int env_relevant(const char *e)
{
    return (e[0] == 'P' && strncmp(e, "PPROF_", 6) == 0) ||
           (e[0] == 'O' && strncmp(e, "OTEL_", 5) == 0) ||
           (e[0] == 'X' && strncmp(e, "XDG_", 4) == 0);
}

STARTUP static void env_gather(void)
{
    int n = 0;
    for (char *const *e = env_source ? env_source : environ; e && *e; e++) {
        if (!env_relevant(*e))
            continue;
        if (n == ENV_MAX)
            return; /* more than expected: getenv answers */
        env_seen[n++] = *e;
    }
    env_count = n;
}

const char *config_env(const char *name)
{
    if (env_count < 0 || !env_relevant(name))
        return getenv(name);
    size_t len = strlen(name);
    for (int i = 0; i < env_count; i++)
        if (strncmp(env_seen[i], name, len) == 0 && env_seen[i][len] == '=')
            return env_seen[i] + len + 1;
    return NULL;
}

/* Five seconds: far beyond any healthy lock wait, soon enough for an
 * operator looking at a hung service. */
long opt_deadlock_seconds = 5;

int config_copy_prefix(char *dst, size_t size, const char *s, size_t n)
{
    if (n >= size)
        return -EINVAL;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return 0;
}

STARTUP int config_parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s)
        return -EINVAL;
    long v = 0;
    int neg = 0;
    const char *p = s;
    if (*p == '-') {
        neg = 1;
        p++;
    } else if (*p == '+') {
        p++;
    }
    if (!*p)
        return -EINVAL;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        if (v > (LONG_MAX - (*p - '0')) / 10)
            return -EINVAL;
        v = v * 10 + (*p - '0');
    }
    if (neg)
        v = -v;
    if (v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

STARTUP static void load_long(const char *name, long *opt, long min, long max)
{
    const char *s = config_env(name);
    if (!s)
        return;
    long v;
    /* Plain decimal, as the README says: no '+' (HTTP parameters take
     * one, as Go's do; a setting does not). */
    if (*s != '+' && config_parse_long(s, min, max, &v) == 0) {
        *opt = v;
        return;
    }
    log_info("%s=\"%s\" is not an integer in [%ld, %ld]; using %ld", name, s,
             min, max, *opt);
}

/* One of a list of words, ended by a NULL word. */
struct word {
    const char *word;
    int value;
};

/* *opt becomes the value of the word the variable names; any other text
 * is said in one line ("is not a, b or c; using <the word *opt holds>")
 * and leaves *opt as it is. */
STARTUP static void load_word(const char *name, int *opt, const struct word *words)
{
    const char *s = config_env(name);
    if (!s)
        return;
    const char *keep = "";
    char list[128];
    size_t len = 0;
    for (const struct word *w = words; w->word; w++) {
        if (strcmp(s, w->word) == 0) {
            *opt = w->value;
            return;
        }
        if (w->value == *opt)
            keep = w->word;
        const char *sep = w == words ? "" : w[1].word ? ", " : " or ";
        len += log_snprintf(list + len, sizeof list - len, "%s%s", sep,
                            w->word);
    }
    log_info("%s=\"%s\" is not %s; using %s", name, s, list, keep);
}

/* A path the agent may create files in: absolute, no newline, short enough
 * for a file name to follow. */
static int good_dir(const char *s)
{
    return s[0] == '/' && !strchr(s, '\n') && strlen(s) + 100 < 1024;
}

/* A file name: not empty (load_text checks its length). */
static int good_file(const char *s)
{
    return s[0] != '\0';
}

/* dst (size bytes) becomes the variable's text when ok() accepts it;
 * anything else is said in one line, "<name>=\"<text>\" <why>", and leaves
 * dst as it is. */
static void load_text(const char *name, char *dst, size_t size,
                      int (*ok)(const char *), const char *why)
{
    const char *s = config_env(name);
    if (!s)
        return;
    if (ok(s) && strlen(s) < size)
        copy_str(dst, size, s);
    else
        log_info("%s=\"%s\" %s", name, s, why);
}

/* A port: decimal digits only (no sign, no spaces), 0-65535. */
static int parse_port(const char *s, long *port)
{
    if (!*s || strlen(s) > 5)
        return -EINVAL;
    for (const char *p = s; *p; p++)
        if (*p < '0' || *p > '9')
            return -EINVAL;
    return config_parse_long(s, 0, 65535, port);
}

/* 1 when host is an IPv4 address as inet_pton(AF_INET) takes it: exactly
 * four decimal octets, each at most 255 and without a leading zero, and
 * nothing after them. Not inet_pton itself: PPROF_ADDR is read in every
 * process the agent is preloaded into, and there inet_pton was a lazy
 * binding and a page of the C library's code that a process without the
 * agent never touches. */
static int ipv4_literal(const char *host)
{
    const char *p = host;
    for (int octet = 0; octet < 4; octet++) {
        if (octet > 0 && *p++ != '.')
            return 0;
        if (*p < '0' || *p > '9')
            return 0;
        int v = 0, n = 0;
        for (; *p >= '0' && *p <= '9'; p++, n++) {
            if (n > 0 && v == 0)
                return 0; /* a leading zero */
            v = v * 10 + (*p - '0');
            if (v > 255)
                return 0;
        }
    }
    return *p == '\0';
}

/* 1 when s is "localhost" in any case (ASCII: the agent reads its settings
 * before the program sets a locale). strcasecmp's code and its locale's
 * table would be two pages more in every process. */
static int is_localhost(const char *s)
{
    const char *want = "localhost";
    for (; *want; s++, want++)
        if ((*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s) != *want)
            return 0;
    return *s == '\0';
}

/*
 * Parses host:port into civetweb's listening_ports syntax. Accepts an IPv4
 * literal in dotted-quad form, "localhost" (any case), a bracketed IPv6
 * literal ("[::1]") or an empty host (all interfaces), and a port of
 * digits in [0, 65535]: anything else (a missing port, a sign, trailing
 * characters, an octet over 255) is -EINVAL. *ipv6 says whether the host
 * is an IPv6 literal.
 */
static int parse_addr(const char *s, char *civet, size_t size, int *loopback,
                      int *ipv6)
{
    const char *colon = strrchr(s, ':');
    long port;
    if (!colon || parse_port(colon + 1, &port) != 0)
        return -EINVAL;
    char host[200];
    size_t hl = (size_t)(colon - s);
    if (config_copy_prefix(host, sizeof host, s, hl) != 0)
        return -EINVAL;

    *ipv6 = 0;
    if (is_localhost(host))
        copy_str(host, sizeof host, "127.0.0.1");
    if (host[0] == '[') {
        struct in6_addr a6;
        if (hl < 3 || host[hl - 1] != ']')
            return -EINVAL;
        host[hl - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &a6) != 1)
            return -EINVAL;
        host[hl - 1] = ']';
        *ipv6 = 1;
        *loopback = IN6_IS_ADDR_LOOPBACK(&a6) ||
                    (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    } else if (host[0] == '\0') {
        *loopback = 0;
    } else {
        if (!ipv4_literal(host))
            return -EINVAL;
        *loopback = strncmp(host, "127.", 4) == 0;
    }
    if (host[0])
        log_snprintf(civet, size, "%s:%ld", host, port);
    else
        log_snprintf(civet, size, "%ld", port);
    return 0;
}

/* A PPROF_ADDR that cannot be read turns the endpoints off: serving on the
 * default instead would put a server where the user did not ask for one
 * (a mistyped "OFF" meant none at all). */
STARTUP static void load_addr(void)
{
    const char *s = config_env("PPROF_ADDR");
    if (!s)
        return;
    if (strcmp(s, "off") == 0) {
        opt_serve = 0;
        copy_str(opt_addr_shown, sizeof opt_addr_shown, s);
        return;
    }
    char civet[256];
    int loopback = 1, ipv6 = 0;
    if (strncmp(s, "unix:", 5) == 0) {
        log_info("PPROF_ADDR=\"%s\": unix sockets are not supported by this "
                 "build's HTTP library; profiling endpoints are off",
                 s);
        opt_serve = 0;
        return;
    }
    if (parse_addr(s, civet, sizeof civet, &loopback, &ipv6) != 0) {
        log_info("PPROF_ADDR=\"%s\" is not host:port (an IPv4 address, "
                 "localhost or [IPv6 address], a port 0-65535) or off; "
                 "profiling endpoints are off",
                 s);
        opt_serve = 0;
        return;
    }
    copy_str(opt_addr, sizeof opt_addr, civet);
    copy_str(opt_addr_shown, sizeof opt_addr_shown, s);
    opt_addr_loopback = loopback;
    opt_addr_ipv6 = ipv6;
}

/* PPROF_DEBUG_DIR: a ':'-separated list of absolute directories searched
 * for separate debug files before /usr/lib/debug (empty entries skipped). */
static void load_debug_dir(void)
{
    const char *s = config_env("PPROF_DEBUG_DIR");
    if (!s)
        return;
    int ok = strlen(s) < sizeof opt_debug_dir;
    for (const char *p = s; ok && *p; p++)
        if ((p == s || p[-1] == ':') && *p != '/' && *p != ':')
            ok = 0;
    if (ok)
        copy_str(opt_debug_dir, sizeof opt_debug_dir, s);
    else
        log_info("PPROF_DEBUG_DIR=\"%s\" is not a ':'-separated list of "
                 "absolute directories (under %zu characters); using none",
                 s, sizeof opt_debug_dir);
}

STARTUP void config_load(void)
{
    static const struct word log_words[] = {
        {"quiet", LOG_QUIET}, {"info", LOG_INFO}, {"debug", LOG_DEBUG}, {0}};
    static const struct word enable_words[] = {{"0", 0}, {"1", 1}, {0}};
    env_gather();
    /* An exec'd descendant of a process under the agent
     * (config_exec_child, set by the constructor before it calls this)
     * says nothing unless PPROF_LOG asks: a shell in every tmux pane,
     * each process of a build. */
    if (config_exec_child)
        opt_log_level = LOG_QUIET;
    load_word("PPROF_LOG", &opt_log_level, log_words);
    load_word("PPROF_ENABLE", &opt_enable, enable_words);
    const char *s;

    load_addr();

    load_text("PPROF_PORT_FILE", opt_port_file, sizeof opt_port_file,
              good_file, "is empty or too long; not writing the port");

    s = config_env("PPROF_TOKEN");
    if (s) {
        size_t n = strlen(s);
        int printable = 1;
        for (size_t i = 0; i < n; i++)
            if (s[i] <= ' ' || s[i] == 127)
                printable = 0;
        if (n > 0 && n < sizeof opt_token && printable)
            copy_str(opt_token, sizeof opt_token, s);
        else
            log_info("PPROF_TOKEN is empty, longer than %zu characters or has "
                     "spaces or control characters; ignoring it",
                     sizeof opt_token - 1);
    }

    if (opt_serve && !opt_addr_loopback && !opt_token[0]) {
        log_info("refusing to serve on %s without PPROF_TOKEN: the endpoints "
                 "reveal code, command line and memory layout; set "
                 "PPROF_TOKEN or use a loopback address",
                 opt_addr_shown);
        opt_serve = 0;
    }

    load_long("PPROF_HEAP_RATE", &opt_heap_rate, 0, 1L << 40);
    long hz = opt_cpu_hz;
    load_long("PPROF_CPU_HZ", &hz, 1, 10000);
    opt_cpu_hz = (int)hz;
    static const struct word sampler_words[] = {{"auto", CPU_SAMPLER_AUTO},
                                                {"perf", CPU_SAMPLER_PERF},
                                                {"timer", CPU_SAMPLER_TIMER},
                                                {0}};
    load_word("PPROF_CPU_SAMPLER", &opt_cpu_sampler, sampler_words);
    hz = opt_wall_hz;
    load_long("PPROF_WALL_HZ", &hz, 1, 1000);
    opt_wall_hz = (int)hz;
    load_long("PPROF_WALL_COST", &opt_wall_cost, 0, 1000);
    load_long("PPROF_MUTEX_FRACTION", &opt_mutex_fraction, 0, 1000000000L);
    load_long("PPROF_BLOCK_RATE", &opt_block_rate, 0, 1000000000000L);
    load_long("PPROF_DEADLOCK_SECONDS", &opt_deadlock_seconds, 0, 86400);
    load_debug_dir();
    config_load_ops();
    config_load_push();
    if (!env_source)
        env_count = -1; /* the host may change its environment from now on */
}

/* Defined at the end of the file, after every setting. */
static void settings_as_loaded(void);

STARTUP void config_load_from(char *const *entries)
{
    env_source = entries;
    config_attached = 1;
    settings_as_loaded();
    config_load();
}

/* ---- operations: run directory, children, dumps (agent/core/ops.h) ------------ */

/* Both written or read by every constructor (LOAD_STATE). */
char opt_run_dir[1024] LOAD_STATE;
int opt_children = CHILDREN_SERVE;
int opt_exec_children = CHILDREN_OFF;
int config_exec_child;
char opt_dump_dir[1024] LOAD_STATE;
int opt_dump_signal;
long opt_dump_interval;
/* One second: a wrapper, a shell's command or a compiler pass has exec'd
 * or exited by then (start.c). */
long opt_start_delay_ms = 1000;
long opt_memory_dump_bytes;
long opt_memory_dump_percent = 90;
long opt_memory_dump_gap = 60;

/* PPROF_MEMORY_DUMP_AT: "N%" (1-100) of the limit, or a size in bytes with
 * an optional K, M or G (powers of 1024). */
static void load_memory_dump_at(void)
{
    const char *s = config_env("PPROF_MEMORY_DUMP_AT");
    if (!s)
        return;
    char num[32];
    size_t n = strlen(s);
    long v, scale = 1;
    char last = n ? s[n - 1] : 0;
    if (last == '%' || last == 'K' || last == 'M' || last == 'G')
        n--;
    if (last == 'K' || last == 'M' || last == 'G')
        scale = last == 'K' ? 1L << 10 : last == 'M' ? 1L << 20 : 1L << 30;
    int ok = n > 0 && s[0] >= '0' && s[0] <= '9' &&
             config_copy_prefix(num, sizeof num, s, n) == 0;
    if (ok && last == '%' && config_parse_long(num, 1, 100, &v) == 0) {
        opt_memory_dump_percent = v;
        opt_memory_dump_bytes = 0;
        return;
    }
    if (ok && last != '%' &&
        config_parse_long(num, 1, (1L << 50) / scale, &v) == 0) {
        opt_memory_dump_bytes = v * scale;
        opt_memory_dump_percent = 0;
        return;
    }
    log_info("PPROF_MEMORY_DUMP_AT=\"%s\" is not a percentage (1%%-100%%) or "
             "a size in bytes (K, M or G allowed); using %ld%%",
             s, opt_memory_dump_percent);
}


/* Signals an operator may give: those whose default action is to terminate
 * or to be ignored and that no C library or debugger needs. TERM, INT and
 * the fault signals are refused: taking one over would stop the program
 * from ending as it should. */
static int parse_dump_signal(const char *s)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {
        {"HUP", SIGHUP},     {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
        {"USR2", SIGUSR2},   {"WINCH", SIGWINCH}, {"URG", SIGURG},
        {"PWR", SIGPWR},     {"TTIN", SIGTTIN},   {"TTOU", SIGTTOU},
    };
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].sig;
    long n;
    /* Numbers are plain decimal: a digit first, no sign. */
    if (strncmp(s, "RTMIN+", 6) == 0 && s[6] >= '0' && s[6] <= '9' &&
        config_parse_long(s + 6, 0, SIGRTMAX - SIGRTMIN, &n) == 0)
        return SIGRTMIN + (int)n;
    if (strncmp(s, "RTMAX-", 6) == 0 && s[6] >= '0' && s[6] <= '9' &&
        config_parse_long(s + 6, 0, SIGRTMAX - SIGRTMIN, &n) == 0)
        return SIGRTMAX - (int)n;
    if (s[0] >= '0' && s[0] <= '9' && config_parse_long(s, 1, SIGRTMAX, &n) == 0) {
        if (n >= SIGRTMIN)
            return (int)n;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (names[i].sig == n)
                return (int)n;
    }
    return 0;
}

STARTUP void config_load_ops(void)
{
    const char *s = config_env("PPROF_RUN_DIR");
    if (s && strcmp(s, "off") == 0) {
        opt_run_dir[0] = '\0';
    } else if (s && good_dir(s)) {
        copy_str(opt_run_dir, sizeof opt_run_dir, s);
    } else {
        /* $XDG_RUNTIME_DIR is per user and cleaned at logout; root (most
         * services) uses /run, a memory file system cleaned at boot; any
         * other user gets a folder of its own in /tmp. */
        const char *xdg = config_env("XDG_RUNTIME_DIR");
        if (xdg && good_dir(xdg))
            log_snprintf(opt_run_dir, sizeof opt_run_dir, "%s/pprofagent",
                         xdg);
        else if (geteuid() == 0 && access("/run", W_OK) == 0)
            log_snprintf(opt_run_dir, sizeof opt_run_dir, "/run/pprofagent");
        else
            log_snprintf(opt_run_dir, sizeof opt_run_dir,
                         "/tmp/pprofagent-%u", (unsigned)getuid());
        if (s)
            log_info("PPROF_RUN_DIR=\"%s\" is not an absolute directory (under "
                     "900 characters) or off; using %s",
                     s, opt_run_dir);
    }

    static const struct word children_words[] = {
        {"serve", CHILDREN_SERVE}, {"off", CHILDREN_OFF}, {0}};
    load_word("PPROF_CHILDREN", &opt_children, children_words);
    load_word("PPROF_EXEC_CHILDREN", &opt_exec_children, children_words);

    load_text("PPROF_DUMP_DIR", opt_dump_dir, sizeof opt_dump_dir, good_dir,
              "is not an absolute directory (under 900 characters); "
              "writing no dumps");

    s = config_env("PPROF_DUMP_SIGNAL");
    if (s) {
        opt_dump_signal = parse_dump_signal(s);
        if (!opt_dump_signal)
            log_info("PPROF_DUMP_SIGNAL=\"%s\" is not one of HUP, QUIT, USR1, "
                     "USR2, WINCH, URG, PWR, TTIN, TTOU, RTMIN+N, RTMAX-N "
                     "(or its number); no dumps on a signal",
                     s);
    }
    load_long("PPROF_DUMP_INTERVAL", &opt_dump_interval, 0, 86400 * 365);
    load_long("PPROF_START_DELAY_MS", &opt_start_delay_ms, 0, 600000);
    load_memory_dump_at();
    load_long("PPROF_MEMORY_DUMP_GAP", &opt_memory_dump_gap, 0, 86400);
    if ((opt_dump_signal || opt_dump_interval) && !opt_dump_dir[0])
        log_info("PPROF_DUMP_SIGNAL and PPROF_DUMP_INTERVAL need "
                 "PPROF_DUMP_DIR; writing no dumps");
}

/* ---- an attach starts from the defaults ------------------------------------ */

/* Every setting config_load and config_load_ops read (the push's are set
 * back by config_load_push). The library attached to a process is loaded
 * once and stays mapped, inert, after a detach: a later attach would
 * otherwise keep what the last one's command set and this one's does not
 * (its PPROF_HEAP_RATE, its dump directory...). */
#define SETTINGS(X)                                                            \
    X(opt_enable) X(opt_serve) X(opt_addr) X(opt_addr_shown)                   \
    X(opt_addr_loopback) X(opt_addr_ipv6) X(opt_port_file) X(opt_token)        \
    X(opt_log_level) X(opt_heap_rate) X(opt_cpu_hz) X(opt_cpu_sampler)         \
    X(opt_wall_hz) X(opt_wall_cost) X(opt_mutex_fraction) X(opt_block_rate)    \
    X(opt_debug_dir) X(opt_deadlock_seconds) X(opt_run_dir) X(opt_children)    \
    X(opt_exec_children) X(opt_dump_dir) X(opt_dump_signal)                    \
    X(opt_dump_interval) X(opt_start_delay_ms) X(opt_memory_dump_bytes)       \
    X(opt_memory_dump_percent) X(opt_memory_dump_gap)
#define SETTING_ENTRY(v) {&(v), sizeof(v)},
#define SETTING_SIZE(v) +sizeof(v)
static const struct setting {
    void *at;
    size_t size;
} settings[] = {SETTINGS(SETTING_ENTRY)};

/* The settings' values as the library was loaded (its defaults: an
 * attached agent's constructor reads no setting), kept at the first
 * attach and put back at each later one. */
static unsigned char as_loaded[0 SETTINGS(SETTING_SIZE)];
static int as_loaded_kept;

static void settings_as_loaded(void)
{
    size_t off = 0;
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        const struct setting *e = &settings[i];
        if (as_loaded_kept)
            memcpy(e->at, as_loaded + off, e->size);
        else
            memcpy(as_loaded + off, e->at, e->size);
        off += e->size;
    }
    as_loaded_kept = 1;
}
