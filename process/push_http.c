/*
 * One OTLP/HTTP request (process/push.h): POST of a binary protobuf body
 * to the configured endpoint, on a connection of its own (one request an
 * interval needs no pool), over TLS when the endpoint is https://
 * (push_tls.c). Every step has the same deadline: the name lookup aside
 * (getaddrinfo has none), connecting, writing and reading poll with what
 * is left, so a collector that is slow or does not answer costs the push
 * thread at most the timeout, and nobody else anything.
 *
 * The answer read: the status line, Retry-After (seconds) and, for a
 * refusal, the start of its body for the log. Runs on the push thread.
 */
#include "process/push.h"
#include "agent/core/real.h"

#include "agent/host/fds.h"
#include "agent/core/push.h"
#include "agent/core/loader.h"
#include "encoder/otlp.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A connection: the socket, and the TLS session over it when there is
 * one. */
struct conn {
    int fd;
    struct push_tls *tls;
    int64_t deadline;
};

int64_t push_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int wait_fd(const struct conn *c, short events)
{
    int64_t left = c->deadline - push_mono_ns();
    if (left <= 0)
        return -ETIMEDOUT;
    struct pollfd p = {.fd = c->fd, .events = events};
    int r = real_poll(&p, 1, (int)(left / 1000000) + 1);
    if (r == 0)
        return -ETIMEDOUT;
    return r < 0 ? -errno : 0;
}

/* Connects to the first address that answers before the deadline. */
static int dial(struct conn *c)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    /* Inside the fork gate: the resolver's locks are not reset in a fork
     * child (agent/core/loader.c). */
    loader_gate_enter();
    int gai = getaddrinfo(opt_push.host, opt_push.port, &hints, &res);
    loader_gate_leave();
    if (gai != 0)
        return -EHOSTUNREACH;
    int err = -ECONNREFUSED;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC |
                                          SOCK_NONBLOCK,
                        a->ai_protocol);
        if (fd < 0) {
            err = -errno;
            continue;
        }
        c->fd = fd;
        if (real_connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            err = 0;
        } else if (errno == EINPROGRESS) {
            err = wait_fd(c, POLLOUT);
            int so = 0;
            socklen_t len = sizeof so;
            if (err == 0 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) == 0 && so)
                err = -so;
        } else {
            err = -errno;
        }
        if (err == 0)
            break;
        fds_close(fd);
        c->fd = -1;
        if (err == -ETIMEDOUT)
            break;
    }
    freeaddrinfo(res);
    return err;
}

static int send_all(struct conn *c, const void *p, size_t n)
{
    const char *s = p;
    while (n > 0) {
        ssize_t w;
        if (c->tls) {
            w = push_tls_write(c->tls, s, n);
            if (w == -EAGAIN)
                continue; /* push_tls waited as OpenSSL asked */
            if (w < 0)
                return (int)w;
        } else {
            w = send(c->fd, s, n, MSG_NOSIGNAL);
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
                int err = wait_fd(c, POLLOUT);
                if (err)
                    return err;
                continue;
            }
            if (w < 0)
                return -errno;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads what arrives, up to size bytes; 0 at the end of the stream. */
static ssize_t recv_some(struct conn *c, char *buf, size_t size)
{
    for (;;) {
        ssize_t r;
        if (c->tls) {
            r = push_tls_read(c->tls, buf, size);
            if (r != -EAGAIN)
                return r;
            continue; /* push_tls waited as OpenSSL asked */
        } else {
            r = recv(c->fd, buf, size, 0);
            if (r >= 0)
                return r;
            if (errno != EAGAIN && errno != EINTR)
                return -errno;
        }
        int err = wait_fd(c, POLLIN);
        if (err)
            return err;
    }
}

/* The request's head: the request line, Host, the content headers, the
 * profiles version, then the configured headers. */
static void head(struct pbuf *h, size_t len)
{
    int v6 = strchr(opt_push.host, ':') != NULL;
    pbuf_printf(h, "POST %s HTTP/1.1\r\nHost: %s%s%s", opt_push.path,
                v6 ? "[" : "", opt_push.host, v6 ? "]" : "");
    if (strcmp(opt_push.port, opt_push.tls ? "443" : "80") != 0)
        pbuf_printf(h, ":%s", opt_push.port);
    pbuf_printf(h,
                "\r\nUser-Agent: pprofagent\r\nContent-Type: "
                "application/x-protobuf\r\nContent-Length: %zu\r\n"
                "OTLP-Profiles-Development-Version: %s\r\n"
                "Connection: close\r\n",
                len, OTLP_PROFILES_VERSION);
    for (size_t i = 0; i < opt_push.nheaders; i++)
        pbuf_printf(h, "%s: %s\r\n", opt_push.headers[i].key,
                    opt_push.headers[i].value);
    pbuf_puts(h, "\r\n");
}

/* Parses the head of an answer: status and Retry-After; *why gets the
 * reason phrase. */
static void parse_answer(char *text, struct push_answer *a)
{
    a->status = 0;
    a->retry_after_s = -1;
    if (strncmp(text, "HTTP/1.", 7) != 0 || strlen(text) < 12)
        return;
    a->status = atoi(text + 9);
    char *eol = strstr(text, "\r\n");
    if (eol && eol - text > 13) {
        size_t n = (size_t)(eol - text) - 13;
        if (n >= sizeof a->why)
            n = sizeof a->why - 1;
        memcpy(a->why, text + 13, n);
        a->why[n] = '\0';
    }
    for (char *line = eol; line && line[2]; line = strstr(line + 2, "\r\n")) {
        if (strncasecmp(line + 2, "Retry-After:", 12) == 0) {
            char *v = line + 14;
            while (*v == ' ')
                v++;
            if (*v >= '0' && *v <= '9')
                a->retry_after_s = strtol(v, NULL, 10);
        }
    }
}

/* Reads the answer until its head is complete (the body does not
 * matter). */
static int read_answer(struct conn *c, struct push_answer *a)
{
    char buf[4096];
    size_t n = 0;
    while (n < sizeof buf - 1) {
        ssize_t r = recv_some(c, buf + n, sizeof buf - 1 - n);
        if (r < 0)
            return (int)r;
        if (r == 0)
            break;
        n += (size_t)r;
        buf[n] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            parse_answer(buf, a);
            return a->status ? 0 : -EPROTO;
        }
    }
    buf[n] = '\0';
    parse_answer(buf, a);
    return a->status ? 0 : -EPROTO;
}

int push_http_post(const struct pbuf *body, int64_t deadline,
                   struct push_answer *a)
{
    memset(a, 0, sizeof *a);
    struct conn c = {.fd = -1, .deadline = deadline};
    int err = dial(&c);
    if (err == 0 && opt_push.tls)
        err = push_tls_open(c.fd, opt_push.host, c.deadline, &c.tls);
    struct pbuf h = {0};
    head(&h, body->len);
    if (err == 0)
        err = h.oom ? -ENOMEM : send_all(&c, h.data, h.len);
    pbuf_free(&h);
    if (err == 0)
        err = send_all(&c, body->data, body->len);
    if (err == 0)
        err = read_answer(&c, a);
    if (c.tls)
        push_tls_close(c.tls);
    if (c.fd >= 0)
        fds_close(c.fd);
    return err;
}
