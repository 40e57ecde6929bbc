/*
 * The civetweb lifecycle and request dispatch. civetweb serves nothing but
 * the handler registered here: no document root (no file serving, no
 * directory listing), a few worker threads, bounded requests.
 *
 * Limits, so that a flood of requests cannot exhaust the host's memory or
 * starve it: SERVER_THREADS workers (each quick request holds one; a
 * request that waits, a CPU profile or a ?seconds=N delta, is handed to a
 * thread of its own, at most 8 at once: handoff.c), request headers up to
 * 16 KiB, bodies up to MAX_BODY (413 beyond), a 5 s limit on reading a
 * request's headers (from its first byte) and on each write, and a
 * bounded accept queue beyond which the kernel refuses connections. Slow
 * clients can hold every worker: a request then waits at most about
 * ceil(slow clients / SERVER_THREADS) x 5 s. With PPROF_TOKEN set, every request is
 * authenticated first (auth.c) and nothing is read or parsed before that.
 *
 * server_start() runs on the agent's starter thread once the process has
 * lived PPROF_START_DELAY_MS (process/start.c), or in the constructor on the
 * host's main thread when that is 0; the request handler runs on
 * civetweb's threads, which are the agent's own
 * (created with the guard entered, so thread_hooks.c marks them, and with
 * every signal blocked, so the host's signals never land on them).
 */
#include "http/server.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/cpu/cpu.h"
#include "agent/host/fds.h"
#include "agent/guard.h"
#include "agent/log.h"
#include "http/http.h"
#include "agent/symbols/symbols.h"
#include "agent/core/loader.h"
#include "agent/core/ops.h"
#include "agent/host/proc.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_BODY (1 << 20)
/* Two workers and civetweb's listener: three threads at idle. civetweb
 * 1.15 (Debian 12) creates every worker in mg_start and cannot grow or
 * shrink the pool (docs/server.md), so the pool is sized for the idle
 * process, and requests that wait (a CPU profile, a delta) run on threads
 * of their own that end with them (handoff.c). */
#define SERVER_THREADS "2"

static struct mg_context *server_ctx FORK_STATE;
/* Why this process serves (server_role_note): "" or ", <text>". */
static char role_note[160] FORK_STATE;
/* The port listened on, 0 before (or after server_stop). */
static int serving_port;

void server_stop(void)
{
    if (!server_ctx)
        return;
    /* civetweb joins its workers: a request in flight (a CPU profile)
     * ends first. */
    mg_stop(server_ctx);
    server_ctx = NULL;
    serving_port = 0;
}

FORK_PATH void server_fork_child(void)
{
    /* The parent's server and its requests in flight are not the child's:
     * its own server starts from nothing (process/children.c). */
    FORK_SET(server_ctx, NULL);
    FORK_SET(role_note[0], '\0');
    handoff_fork_child();
}

static int log_message(const struct mg_connection *conn, const char *message)
{
    (void)conn;
    log_debug("http: %s", message);
    return 1; /* handled: civetweb must not print or write files itself */
}

static void *init_thread(const struct mg_context *ctx, int type)
{
    (void)ctx;
    (void)type;
    agent_thread_begin();
    cpu_agent_thread(); /* attached, nothing else records civetweb's threads */
    return NULL;
}

static void exit_thread(const struct mg_context *ctx, int type, void *user)
{
    (void)ctx;
    (void)type;
    (void)user;
    cpu_agent_thread_end();
    agent_thread_end();
}

/* Reads the body of a POST (symbolz) up to MAX_BODY. Returns 0, or -1 when
 * the client announced more than MAX_BODY (answered 413 by the caller). */
static int read_body(struct request *r)
{
    const struct mg_request_info *ri = mg_get_request_info(r->conn);
    long long want = ri->content_length;
    if (want <= 0)
        return 0;
    if (want > MAX_BODY)
        return -1;
    r->body = real_malloc((size_t)want + 1);
    if (!r->body)
        return 0;
    size_t got = 0;
    while (got < (size_t)want) {
        int n = mg_read(r->conn, r->body + got, (size_t)want - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    r->body[got] = '\0';
    r->body_len = got;
    const char *ct = mg_get_header(r->conn, "Content-Type");
    r->form_body = ct && strncmp(ct, "application/x-www-form-urlencoded",
                                 strlen("application/x-www-form-urlencoded")) == 0;
    return 0;
}

static void unauthorized(struct mg_connection *conn)
{
    static const char body[] = "Unauthorized\n";
    http_count_status(401);
    mg_printf(conn,
              "HTTP/1.1 401 Unauthorized\r\n"
              "WWW-Authenticate: Basic realm=\"pprof\", charset=\"UTF-8\"\r\n"
              "Content-Type: text/plain; charset=utf-8\r\n"
              "X-Go-Pprof: 1\r\n"
              "X-Content-Type-Options: nosniff\r\n"
              "Content-Length: %zu\r\n"
              "Connection: close\r\n\r\n",
              sizeof body - 1);
    mg_write(conn, body, sizeof body - 1);
}

/* A request that waits for seconds: one that always does (a CPU profile,
 * 30 s by default; a flame graph) or a delta (?seconds=N) of a profile. */
static int is_long(struct request *r, const struct route *route)
{
    char buf[8];
    if (route->flags & ROUTE_LONG)
        return 1;
    return (route->flags & ROUTE_DELTA) &&
           http_param(r, "seconds", buf, sizeof buf) && buf[0] != '\0';
}

static void serve_route(struct request *r, const struct route *route)
{
    r->route = route;
    if (is_long(r, route))
        handoff_serve(r, route->handle, (route->flags & ROUTE_CPU) != 0);
    else
        route->handle(r);
}

static int handle(struct mg_connection *conn, void *data)
{
    (void)data;
    agent_tls.agent_thread = 1;
    if (!auth_check(mg_get_header(conn, "Authorization"), opt_token)) {
        unauthorized(conn);
        return 401;
    }
    const struct mg_request_info *ri = mg_get_request_info(conn);
    struct request r = {
        .conn = conn,
        .method = ri->request_method ? ri->request_method : "GET",
        .name = "",
        .query = ri->query_string ? ri->query_string : "",
    };

    enum path_kind kind =
        path_classify(ri->local_uri ? ri->local_uri : "/", &r.name);
    switch (kind) {
    case PATH_REDIRECT:
        http_count_status(301);
        mg_printf(conn, "HTTP/1.1 301 Moved Permanently\r\n"
                        "Location: /debug/pprof/\r\n"
                        "Content-Length: 0\r\nConnection: close\r\n\r\n");
        return 301;
    case PATH_NOT_FOUND:
        http_error(&r, 404, "404 page not found");
        return 404;
    case PATH_BESIDE:
    case PATH_INDEX:
    case PATH_NAMED:
        break;
    }
    if (read_body(&r) != 0) {
        http_error(&r, 413, "request body too large");
        return 413;
    }
    struct route custom;
    const struct route *route =
        kind == PATH_INDEX ? NULL
                           : routes_find(r.name, kind == PATH_BESIDE, &custom);
    if (kind == PATH_INDEX)
        handle_index(&r);
    else if (route)
        serve_route(&r, route);
    else if (kind == PATH_BESIDE)
        http_error(&r, 404, "404 page not found");
    else
        http_error(&r, 404, "Unknown profile");
    real_free(r.body);
    /* The answer is out: the symbolizer gives back what it loaded. */
    symbols_release();
    return 200;
}

/* The port file created before the host gave up root (start.c), to be
 * filled once the server listens; -1 when none. dev and ino tell whether
 * the descriptor is still that file: a host may have closed it and reused
 * the number. */
static int reserved_port_fd = -1;
static dev_t reserved_dev;
static ino_t reserved_ino;

void server_reserve_port_file(void)
{
    if (!opt_port_file[0] || reserved_port_fd >= 0)
        return;
    int fd = open(opt_port_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
                                     O_NOFOLLOW,
                  0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0)
            close(fd);
        return; /* said when the server writes it */
    }
    reserved_port_fd = fd;
    reserved_dev = st.st_dev;
    reserved_ino = st.st_ino;
}

/* Fills the reserved port file; 0, or -1 when there is none to fill. */
static int fill_reserved(const char *addr, size_t len)
{
    int fd = reserved_port_fd;
    if (fd < 0)
        return -1;
    reserved_port_fd = -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_dev != reserved_dev ||
        st.st_ino != reserved_ino)
        return -1; /* not ours any more: never write or close it */
    ssize_t w = real_pwrite(fd, addr, len, 0);
    if (w != (ssize_t)len)
        log_info("cannot write PPROF_PORT_FILE %s: %s", opt_port_file,
                 log_errtext(w < 0 ? errno : EIO));
    close(fd);
    return 0;
}

/* 1 when a seccomp filter may judge this process's system calls: an
 * unlink the filter forbids could kill the process. */
static int filtered(void)
{
    char buf[4096];
    if (proc_read("/proc/self/status", buf, sizeof buf) <= 0)
        return 1;
    const char *f = strstr(buf, "\nSeccomp:");
    return !f || strtol(f + 9, NULL, 10) != 0;
}

void server_port_file_after_exec(int64_t lived_ns)
{
    struct stat st;
    struct timespec now;
    if (!opt_port_file[0] || lstat(opt_port_file, &st) != 0 ||
        !S_ISREG(st.st_mode) || st.st_size == 0 ||
        clock_gettime(CLOCK_REALTIME, &now) != 0)
        return;
    /* Only a file written while this process lived: one left by an earlier
     * run is not this process's to judge. */
    int64_t mtime = (int64_t)st.st_mtim.tv_sec * 1000000000LL +
                    st.st_mtim.tv_nsec;
    int64_t started =
        (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - lived_ns;
    if (mtime < started || filtered())
        return;
    if (unlink(opt_port_file) == 0)
        log_debug("removed PPROF_PORT_FILE %s: it named the server of this "
                  "process's image before exec",
                  opt_port_file);
}

/* The host part of PPROF_ADDR as served: civetweb's "port" alone means
 * every interface. */
static void served_host(char *out, size_t size)
{
    const char *colon = strrchr(opt_addr, ':');
    if (colon)
        config_copy_prefix(out, size, opt_addr, (size_t)(colon - opt_addr));
    else
        log_snprintf(out, size, "0.0.0.0");
}

void server_write_port_file(int port)
{
    if (!opt_port_file[0])
        return;
    char addr[300], host[256];
    served_host(host, sizeof host);
    size_t len = log_snprintf(addr, sizeof addr, "%s:%d", host, port);
    if (fill_reserved(addr, len) == 0)
        return;

    /* Written under a temporary name and renamed, so a reader never sees a
     * half-written address. */
    char tmp[sizeof opt_port_file + 32];
    log_snprintf(tmp, sizeof tmp, "%s.%d.tmp", opt_port_file, (int)getpid());
    int fd = fds_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        log_info("cannot write PPROF_PORT_FILE %s: %s", opt_port_file,
                 log_errtext(errno));
        return;
    }
    ssize_t w = real_write(fd, addr, len);
    fds_close(fd);
    if (w != (ssize_t)len || rename(tmp, opt_port_file) != 0) {
        log_info("cannot write PPROF_PORT_FILE %s: %s", opt_port_file,
                 log_errtext(errno));
        unlink(tmp);
    }
}

/* The reason civetweb could not listen on opt_addr, which it does not say
 * ("Failed to setup server ports"): binding the same address again gives
 * the errno (EADDRINUSE, EADDRNOTAVAIL, EACCES). Falls back to civetweb's
 * text. */
static void bind_error(const char *civet_text, char *out, size_t size)
{
    if (opt_addr_ipv6 && !mg_check_feature(MG_FEATURES_IPV6)) {
        log_snprintf(out, size, "this build's HTTP library has no IPv6");
        return;
    }
    char host[200] = "";
    const char *colon = strrchr(opt_addr, ':');
    long port = 0;
    config_parse_long(colon ? colon + 1 : opt_addr, 0, 65535, &port);
    if (colon && (size_t)(colon - opt_addr) < sizeof host) {
        memcpy(host, opt_addr, (size_t)(colon - opt_addr));
        host[colon - opt_addr] = '\0';
    }
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    } a;
    memset(&a, 0, sizeof a);
    socklen_t len = sizeof a.in;
    a.in.sin_family = AF_INET;
    a.in.sin_port = htons((uint16_t)port);
    if (host[0] == '[') {
        host[strlen(host) - 1] = '\0';
        a.in6.sin6_family = AF_INET6;
        a.in6.sin6_port = htons((uint16_t)port);
        inet_pton(AF_INET6, host + 1, &a.in6.sin6_addr);
        len = sizeof a.in6;
    } else if (host[0]) {
        inet_pton(AF_INET, host, &a.in.sin_addr);
    }
    int err = 0;
    int fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        if (bind(fd, &a.sa, len) != 0)
            err = errno;
        close(fd);
    }
    log_snprintf(out, size, "%s",
                 err ? log_errtext(err)
                     : (civet_text[0] ? civet_text : "unknown error"));
}

/* The port this process's server listens on, 0 before it does. */
void server_address(char *out, size_t size)
{
    out[0] = '\0';
    if (!serving_port)
        return;
    char host[200];
    served_host(host, sizeof host);
    log_snprintf(out, size, "%s:%d", host, serving_port);
}

void server_role_note(const char *text)
{
    log_snprintf(role_note, sizeof role_note, ", %s", text);
}

/* Set once this process (or the parent it was forked from) said where it
 * serves at the default level. */
static int said_serving;

/* The one line at the default log level: where this process serves, and
 * why not where it was asked to when the address was taken. A forked
 * worker (quiet), or a process forked from one that said it already, is
 * found through its parent (/debug/pprof/processes): its line is debug. */
static void say_serving(int port, const char *first_error, int quiet)
{
    char host[200];
    served_host(host, sizeof host);
    int level = said_serving || quiet ? LOG_DEBUG : LOG_INFO;
    if (first_error[0])
        log_msg(level,
                "cannot serve on %s (%s); serving "
                "http://%s:%d/debug/pprof/ instead (pid %d%s)",
                opt_addr_shown, first_error, host, port, (int)getpid(),
                role_note);
    else
        log_msg(level, "serving http://%s:%d/debug/pprof/ (pid %d%s)", host,
                port, (int)getpid(), role_note);
    if (level == LOG_INFO && opt_log_level >= LOG_INFO)
        said_serving = 1;
}

int server_start(const struct server_listen *how)
{
    mg_init_library(0);
    const char *options[] = {
        "listening_ports", how->addr,
        "num_threads", SERVER_THREADS,
        "listen_backlog", "64",
        "connection_queue", "32",
        "request_timeout_ms", "5000",
        "enable_keep_alive", "no",
        "max_request_size", "16384",
        "enable_directory_listing", "no",
        "enable_auth_domain_check", "no",
        NULL,
    };
    struct mg_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.log_message = log_message;
    cb.init_thread = init_thread;
    cb.exit_thread = exit_thread;
    struct mg_init_data init = {
        .callbacks = &cb,
        .user_data = NULL,
        .configuration_options = options,
    };
    char errtext[256] = "";
    unsigned code = 0;
    struct mg_error_data err = {
        .code = &code,
        .text = errtext,
        .text_buffer_size = sizeof errtext,
    };

    /* civetweb's threads inherit this thread's signal mask: block every
     * signal while they are created so the host's signals (and the CPU
     * profiler's) are never delivered to them. */
    sigset_t all, old;
    sigfillset(&all);
    real_pthread_sigmask(SIG_SETMASK, &all, &old);
    /* civetweb's sockets are the agent's own (agent/host/fds.c). */
    fds_own_library((const void *)mg_start2);
    /* civetweb resolves the listening address with getaddrinfo, whose
     * locks a fork child would inherit held: inside the fork gate
     * (agent/core/loader.c). */
    loader_gate_enter();
    server_ctx = mg_start2(&init, &err);
    /* The address is taken (an exec'd child of a process under the agent,
     * a second instance): the caller may give another (port 0) to try. */
    char first_error[256] = "";
    if (!server_ctx)
        bind_error(errtext, first_error, sizeof first_error);
    if (!server_ctx && how->fallback && how->fallback(how->addr, how->addr_size))
        server_ctx = mg_start2(&init, &err);
    loader_gate_leave();
    real_pthread_sigmask(SIG_SETMASK, &old, NULL);

    if (!server_ctx) {
        log_info("cannot serve on %s: %s; profiling endpoints are off",
                 opt_addr_shown, first_error);
        return -EADDRINUSE;
    }
    mg_set_request_handler(server_ctx, "/", handle, NULL);

    struct mg_server_port ports[4];
    memset(ports, 0, sizeof ports);
    int nports = mg_get_server_ports(server_ctx, 4, ports);
    int port = nports > 0 ? ports[0].port : 0;
    serving_port = port;
    say_serving(port, first_error, how->quiet);
    if (how->on_listening)
        how->on_listening(port);
    return 0;
}
