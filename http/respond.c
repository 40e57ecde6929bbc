/*
 * Response helpers and parameter parsing shared by every endpoint, shaped
 * after Go's net/http/pprof: the same headers, status codes and error
 * bodies, so pprof clients show our messages as they show Go's.
 */
#include "http/http.h"
#include "agent/core/real.h"

#include "agent/config.h"
#include "agent/host/fds.h"
#include "agent/log.h"
#include "encoder/encoder.h"

#include <civetweb.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

static const char *status_text(int status)
{
    switch (status) {
    case 200: return "OK";
    case 301: return "Moved Permanently";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Status";
    }
}

/* Responses by status, for /debug/stats: 2xx..5xx and the codes the
 * endpoints use, counted where the status line is written. */
long http_status_counts[HTTP_STATUS_SLOTS];

void http_count_status(int status)
{
    int slot = status >= 100 && status < 600 ? status / 100 : 0;
    __atomic_fetch_add(&http_status_counts[slot], 1, __ATOMIC_RELAXED);
    static const int codes[] = {HTTP_STATUS_CODES};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i] == status)
            __atomic_fetch_add(&http_status_counts[6 + i], 1,
                               __ATOMIC_RELAXED);
}

/* A sub-request (r->capture set) keeps its answer instead of writing it:
 * the flame graph reads a profile handler's output this way. */
static int capture(struct request *r, int status, const void *body,
                   size_t len)
{
    if (!r->capture)
        return 0;
    r->capture_status = status;
    pbuf_append(r->capture, body, len);
    return 1;
}

/* Writes to the client: civetweb's connection, or the socket writer of a
 * request handed off to its own thread. */
static void emit(struct request *r, const void *data, size_t len)
{
    if (len == 0)
        return;
    if (r->out)
        r->out->write(r->out->ctx, data, len);
    else
        mg_write(r->conn, data, len);
}

/* The status line and headers every response carries; extra holds the
 * response's own header lines. */
static void emit_head(struct request *r, int status, const char *content_type,
                      const char *extra, size_t len)
{
    char head[1024];
    size_t n = log_snprintf(head, sizeof head,
                            "HTTP/1.1 %d %s\r\n"
                            "Content-Type: %s\r\n"
                            "%s"
                            "X-Content-Type-Options: nosniff\r\n"
                            "Content-Length: %zu\r\n"
                            "Connection: close\r\n\r\n",
                            status, status_text(status), content_type, extra,
                            len);
    emit(r, head, n);
}

void http_send(struct request *r, int status, const char *content_type,
               const char *disposition_name, const void *body, size_t len)
{
    if (capture(r, status, body, len))
        return;
    http_count_status(status);
    char disp[256] = "";
    if (disposition_name)
        log_snprintf(disp, sizeof disp,
                     "Content-Disposition: attachment; filename=\"%s\"\r\n",
                     disposition_name);
    emit_head(r, status, content_type, disp, len);
    emit(r, body, len);
}

void http_send_with(struct request *r, const char *content_type,
                    const char *disposition_name, const char *extra,
                    const void *body, size_t len)
{
    if (capture(r, 200, body, len))
        return;
    http_count_status(200);
    char head[512];
    log_snprintf(head, sizeof head,
                 "Content-Disposition: attachment; filename=\"%s\"\r\n%s",
                 disposition_name, extra);
    emit_head(r, 200, content_type, head, len);
    emit(r, body, len);
}

void http_error(struct request *r, int status, const char *msg)
{
    char line[512];
    size_t n = log_snprintf(line, sizeof line, "%s\n", msg);
    if (capture(r, status, line, n))
        return;
    http_count_status(status);
    emit_head(r, status, "text/plain; charset=utf-8", "X-Go-Pprof: 1\r\n", n);
    emit(r, line, n);
}

void http_send_profile(struct request *r, const char *filename,
                       const struct pbuf *gz)
{
    http_send(r, 200, "application/octet-stream", filename, gz->data, gz->len);
}

void http_send_text(struct request *r, const struct pbuf *text)
{
    http_send(r, 200, "text/plain; charset=utf-8", NULL, text->data,
              text->len);
}

void http_html_escape(struct pbuf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': pbuf_puts(b, "&lt;"); break;
        case '>': pbuf_puts(b, "&gt;"); break;
        case '&': pbuf_puts(b, "&amp;"); break;
        case '\'': pbuf_puts(b, "&#39;"); break;
        case '"': pbuf_puts(b, "&#34;"); break;
        default: pbuf_append(b, s, 1);
        }
    }
}

int http_param(struct request *r, const char *name, char *out, size_t size)
{
    if (size == 0)
        return 0;
    out[0] = '\0';
    int got = -1;
    if (r->query[0])
        got = mg_get_var(r->query, strlen(r->query), name, out, size);
    if (got == -1 && r->body && r->form_body)
        got = mg_get_var(r->body, r->body_len, name, out, size);
    if (got >= 0 && (size_t)got == strlen(out))
        return 1;
    /* -2: present but longer than out; or a %00 inside. It is still the
     * user's value, and a wrong one for every parameter we read: make it
     * one that no parser accepts rather than pretend it was absent or
     * read only its part before the NUL. */
    log_snprintf(out, size, "%s", got != -1 ? "?" : "");
    return got != -1;
}

int http_param_debug(struct request *r)
{
    char buf[32];
    long v;
    if (!http_param(r, "debug", buf, sizeof buf))
        return 0;
    if (config_parse_long(buf, -1000000, 1000000, &v) != 0)
        return 0;
    return (int)v;
}

int http_param_seconds(struct request *r, long *seconds)
{
    char buf[64];
    if (!http_param(r, "seconds", buf, sizeof buf) || buf[0] == '\0')
        return 0;
    if (config_parse_long(buf, 1, 3600, seconds) != 0) {
        http_error(r, 400,
                   "invalid value for \"seconds\" - must be a positive "
                   "integer (at most 3600)");
        return -1;
    }
    return 1;
}

int http_param_ns(struct request *r, const char *name, int64_t *ns)
{
    char buf[64];
    if (!http_param(r, name, buf, sizeof buf) || buf[0] == '\0')
        return 0;
    char *end;
    double v = strtod(buf, &end);
    if (*end != '\0' || !(v >= 0) || v > 1e9 || isnan(v)) {
        char msg[128];
        log_snprintf(msg, sizeof msg,
                     "invalid value for \"%s\" - must be a non-negative "
                     "number of seconds",
                     name);
        http_error(r, 400, msg);
        return -1;
    }
    *ns = (int64_t)(v * 1e9);
    return 1;
}

int http_param_delta_seconds(struct request *r, int delta_ok, int debug,
                             long *seconds)
{
    long v = 0;
    *seconds = 0;
    int got = http_param_seconds(r, &v);
    if (got <= 0)
        return got;
    if (!delta_ok) {
        http_error(r, 400,
                   "\"seconds\" parameter is not supported for this profile "
                   "type");
        return -1;
    }
    if (debug != 0) {
        http_error(r, 400, "seconds and debug params are incompatible");
        return -1;
    }
    *seconds = v;
    return 0;
}

/*
 * civetweb does not hand out a connection's socket, so it is found the way
 * a tool would: the socket among our descriptors whose peer is this
 * request's client address and port.
 */
int http_client_socket(struct request *r)
{
    if (r->out)
        return r->out->socket(r->out->ctx);
    const struct mg_request_info *ri =
        r->conn ? mg_get_request_info(r->conn) : NULL;
    if (!ri || !ri->remote_addr[0])
        return -1;
    /* civetweb's sockets are registered (agent/host/fds.c): only those. */
    for (int fd = fds_next(-1, FDS_SOCKET); fd >= 0;
         fd = fds_next(fd, FDS_SOCKET)) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
            continue;
        int port = 0;
        if (ss.ss_family == AF_INET)
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        if (port == ri->remote_port) {
            char host[64];
            if (ss.ss_family == AF_INET)
                inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr,
                          host, sizeof host);
            else
                inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
                          host, sizeof host);
            if (strcmp(host, ri->remote_addr) == 0)
                return fd;
        }
    }
    return -1;
}

static int client_gone(int fd)
{
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (real_poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL))
        return 1;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0;
}

int http_client_gone(struct request *r)
{
    return client_gone(http_client_socket(r));
}

int http_wait(struct request *r, long seconds)
{
    int fd = http_client_socket(r);
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += seconds;
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left_ms = (end.tv_sec - now.tv_sec) * 1000 +
                       (end.tv_nsec - now.tv_nsec) / 1000000;
        if (left_ms <= 0)
            return 0;
        if (client_gone(fd))
            return -1;
        struct timespec nap = {0, (left_ms < 100 ? left_ms : 100) * 1000000L};
        real_nanosleep(&nap, NULL);
    }
}

const char *http_header(struct request *r, const char *name)
{
    return r->conn ? mg_get_header(r->conn, name) : NULL;
}
