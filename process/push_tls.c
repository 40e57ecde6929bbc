/*
 * TLS for an https:// push endpoint, through the system's OpenSSL
 * (libssl.so.3, Debian's libssl3), loaded with dlopen the first time a
 * TLS endpoint is dialled and never otherwise: an agent without
 * PPROF_PUSH, or pushing over plain HTTP, maps no TLS library, and the
 * agent does not link one. The peer is verified against the system's CAs
 * (OpenSSL's default paths) or the file OTEL_EXPORTER_OTLP_CERTIFICATE
 * names, and against the endpoint's host (a name, or an IP address),
 * with SNI. Every step is non-blocking and polls with the request's
 * deadline.
 *
 * Runs on the push's sender thread only; the context is made once.
 */
#include "process/push.h"
#include "agent/core/real.h"

#include "agent/log.h"
#include "agent/core/push.h"
#include "agent/core/loader.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

/* OpenSSL's values this file uses (ssl.h, stable across 1.1 and 3). */
enum {
    SSL_ERROR_SSL_ = 1,
    SSL_ERROR_WANT_READ_ = 2,
    SSL_ERROR_WANT_WRITE_ = 3,
    SSL_ERROR_ZERO_RETURN_ = 6,
    SSL_VERIFY_PEER_ = 1,
    SSL_CTRL_SET_TLSEXT_HOSTNAME_ = 55,
    TLSEXT_NAMETYPE_host_name_ = 0,
};

/* The OpenSSL functions the push calls, each once: the field of `ssl`,
 * the symbol it is loaded from, its type. */
#define SSL_FUNCTIONS(F)                                                       \
    F(client_method, "TLS_client_method", void *, (void))                     \
    F(ctx_new, "SSL_CTX_new", void *, (void *))                               \
    F(ctx_set_verify, "SSL_CTX_set_verify", void, (void *, int, void *))      \
    F(ctx_default_paths, "SSL_CTX_set_default_verify_paths", int, (void *))   \
    F(ctx_load_locations, "SSL_CTX_load_verify_locations", int,               \
      (void *, const char *, const char *))                                   \
    F(ssl_new, "SSL_new", void *, (void *))                                   \
    F(set_fd, "SSL_set_fd", int, (void *, int))                               \
    F(ctrl, "SSL_ctrl", long, (void *, int, long, void *))                    \
    F(set1_host, "SSL_set1_host", int, (void *, const char *))                \
    F(get0_param, "SSL_get0_param", void *, (void *))                         \
    F(param_set1_ip_asc, "X509_VERIFY_PARAM_set1_ip_asc", int,                \
      (void *, const char *))                                                 \
    F(connect, "SSL_connect", int, (void *))                                  \
    F(get_error, "SSL_get_error", int, (const void *, int))                   \
    F(verify_result, "SSL_get_verify_result", long, (const void *))           \
    F(verify_string, "X509_verify_cert_error_string", const char *, (long))   \
    F(write, "SSL_write", int, (void *, const void *, int))                   \
    F(read, "SSL_read", int, (void *, void *, int))                           \
    F(shutdown, "SSL_shutdown", int, (void *))                                \
    F(ssl_free, "SSL_free", void, (void *))                                   \
    F(err_get, "ERR_get_error", unsigned long, (void))                        \
    F(err_string, "ERR_error_string_n", void, (unsigned long, char *, size_t))

#define SSL_FIELD(field, symbol, ret, params) ret(*field) params;
static struct {
    SSL_FUNCTIONS(SSL_FIELD)
} ssl;

static void *ctx;
static int loaded; /* 1: ready, -1: cannot be */

struct push_tls {
    void *ssl;
    int fd;
    int64_t deadline;
};

/* Loads one function of SSL_FUNCTIONS from h; 0 when it is missing. */
#define SSL_LOAD(field, symbol, ret, params)                                   \
    &&(ssl.field = (__typeof__(ssl.field))loader_sym(h, symbol)) != NULL

static int load(void)
{
    if (loaded)
        return loaded > 0 ? 0 : -ENOSYS;
    loaded = -1;
    void *h = loader_open("libssl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        log_info("push: %s is https:// but OpenSSL (libssl.so.3) cannot "
                 "be loaded: %s",
                 opt_push.url, dlerror());
        return -ENOSYS;
    }
    if (!(1 SSL_FUNCTIONS(SSL_LOAD))) {
        log_info("push: the OpenSSL found lacks a function the push needs");
        return -ENOSYS;
    }
    ctx = ssl.ctx_new(ssl.client_method());
    if (!ctx)
        return -ENOMEM;
    ssl.ctx_set_verify(ctx, SSL_VERIFY_PEER_, NULL);
    int ok = opt_push.cert[0]
                 ? ssl.ctx_load_locations(ctx, opt_push.cert, NULL)
                 : ssl.ctx_default_paths(ctx);
    if (ok != 1) {
        log_info("push: cannot load the CA certificates %s",
                 opt_push.cert[0] ? opt_push.cert : "(system default)");
        return -EINVAL;
    }
    loaded = 1;
    return 0;
}

/* Waits as OpenSSL asks after a call returned r; 0 to call again. */
static int wait_for(struct push_tls *t, int r)
{
    int e = ssl.get_error(t->ssl, r);
    short events;
    if (e == SSL_ERROR_WANT_READ_)
        events = POLLIN;
    else if (e == SSL_ERROR_WANT_WRITE_)
        events = POLLOUT;
    else
        return e == SSL_ERROR_ZERO_RETURN_ ? -ECONNRESET : -EPROTO;
    int64_t left = t->deadline - push_mono_ns();
    if (left <= 0)
        return -ETIMEDOUT;
    struct pollfd p = {.fd = t->fd, .events = events};
    int n = real_poll(&p, 1, (int)(left / 1000000) + 1);
    return n > 0 ? 0 : n == 0 ? -ETIMEDOUT : -errno;
}

static void say_failure(struct push_tls *t)
{
    static int said;
    long v = ssl.verify_result(t->ssl);
    char buf[160] = "";
    unsigned long e = ssl.err_get();
    if (e)
        ssl.err_string(e, buf, sizeof buf);
    if (!said) {
        said = 1; /* the sender's own line says each failure after */
        log_info("push: TLS with %s failed: %s", opt_push.host,
                 v ? ssl.verify_string(v) : buf[0] ? buf : "handshake");
    }
}

int push_tls_open(int fd, const char *host, int64_t deadline,
                  struct push_tls **out)
{
    *out = NULL;
    int err = load();
    if (err)
        return err;
    struct push_tls *t = real_calloc(1, sizeof *t);
    if (!t || !(t->ssl = ssl.ssl_new(ctx))) {
        real_free(t);
        return -ENOMEM;
    }
    t->fd = fd;
    t->deadline = deadline;
    unsigned char ip[16];
    int literal = inet_pton(AF_INET, host, ip) == 1 ||
                  inet_pton(AF_INET6, host, ip) == 1;
    ssl.set_fd(t->ssl, fd);
    if (literal) {
        ssl.param_set1_ip_asc(ssl.get0_param(t->ssl), host);
    } else {
        ssl.ctrl(t->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME_,
                 TLSEXT_NAMETYPE_host_name_, (void *)host);
        ssl.set1_host(t->ssl, host);
    }
    for (;;) {
        int r = ssl.connect(t->ssl);
        if (r == 1)
            break;
        err = wait_for(t, r);
        if (err) {
            if (err == -EPROTO)
                say_failure(t);
            push_tls_close(t);
            return err == -EPROTO ? -ECONNABORTED : err;
        }
    }
    *out = t;
    return 0;
}

ssize_t push_tls_write(struct push_tls *t, const void *p, size_t n)
{
    int r = ssl.write(t->ssl, p, n > 1 << 30 ? 1 << 30 : (int)n);
    if (r > 0)
        return r;
    int err = wait_for(t, r);
    return err ? err : -EAGAIN;
}

ssize_t push_tls_read(struct push_tls *t, void *p, size_t n)
{
    int r = ssl.read(t->ssl, p, n > 1 << 30 ? 1 << 30 : (int)n);
    if (r > 0)
        return r;
    if (ssl.get_error(t->ssl, r) == SSL_ERROR_ZERO_RETURN_)
        return 0;
    int err = wait_for(t, r);
    return err ? err : -EAGAIN;
}

void push_tls_close(struct push_tls *t)
{
    if (!t)
        return;
    ssl.shutdown(t->ssl);
    ssl.ssl_free(t->ssl);
    real_free(t);
}
