/*
 * Logging: one line per message on stderr, prefixed "pprofagent:".
 *
 * Entered from any context, signal handlers and interposed calls included,
 * so it has its own small formatter: it never calls stdio or malloc, keeps
 * errno as it found it, and writes each line with a single write(2).
 */
#include "agent/compiler.h"
#include "agent/config.h"
#include "agent/log.h"
#include "agent/core/real.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

struct out {
    char *buf;
    size_t size;
    size_t len;
};

static void put(struct out *o, char c)
{
    if (o->len + 1 < o->size)
        o->buf[o->len++] = c;
}

static void put_str(struct out *o, const char *s)
{
    if (!s)
        s = "(null)";
    while (*s)
        put(o, *s++);
}

static void put_uint(struct out *o, unsigned long long v, unsigned base)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (n)
        put(o, tmp[--n]);
}

PPROF_SIGNAL_SAFE
size_t log_format(char *buf, size_t size, const char *fmt, va_list ap)
{
    struct out o = {buf, size, 0};
    if (size == 0)
        return 0;
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            put(&o, *p);
            continue;
        }
        p++;
        int lng = 0, size_t_mod = 0;
        while (*p == 'l' || *p == 'z') {
            if (*p == 'l')
                lng++;
            else
                size_t_mod = 1;
            p++;
        }
        switch (*p) {
        case 's':
            put_str(&o, va_arg(ap, const char *));
            break;
        case 'c':
            put(&o, (char)va_arg(ap, int));
            break;
        case 'd':
        case 'i': {
            long long v;
            if (size_t_mod)
                v = va_arg(ap, ssize_t);
            else if (lng >= 2)
                v = va_arg(ap, long long);
            else if (lng == 1)
                v = va_arg(ap, long);
            else
                v = va_arg(ap, int);
            if (v < 0) {
                put(&o, '-');
                put_uint(&o, 0ULL - (unsigned long long)v, 10);
            } else {
                put_uint(&o, (unsigned long long)v, 10);
            }
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v;
            if (size_t_mod)
                v = va_arg(ap, size_t);
            else if (lng >= 2)
                v = va_arg(ap, unsigned long long);
            else if (lng == 1)
                v = va_arg(ap, unsigned long);
            else
                v = va_arg(ap, unsigned);
            put_uint(&o, v, *p == 'x' ? 16 : 10);
            break;
        }
        case 'p':
            put_str(&o, "0x");
            put_uint(&o, (uintptr_t)va_arg(ap, void *), 16);
            break;
        case '%':
            put(&o, '%');
            break;
        case '\0':
            p--;
            break;
        default:
            put(&o, '%');
            put(&o, *p);
            break;
        }
    }
    o.buf[o.len] = '\0';
    return o.len;
}

PPROF_SIGNAL_SAFE
size_t log_snprintf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = log_format(buf, size, fmt, ap);
    va_end(ap);
    return n;
}

PPROF_SIGNAL_SAFE
void log_msg(int level, const char *fmt, ...)
{
    if (level > opt_log_level)
        return;
    int saved = errno;
    char line[512];
    static const char prefix[] = "pprofagent: ";
    memcpy(line, prefix, sizeof prefix - 1);
    va_list ap;
    va_start(ap, fmt);
    size_t n = sizeof prefix - 1;
    n += log_format(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    line[n++] = '\n';
    ssize_t r = real_write(STDERR_FILENO, line, n);
    (void)r;
    errno = saved;
}

/* glibc 2.32's; weak, so that a C library without it (musl, whose
 * strerror takes no lock) still loads the agent. */
extern const char *strerrordesc_np(int) __attribute__((weak));

const char *log_errtext(int err)
{
    if (!strerrordesc_np)
        return strerror(err);
    const char *text = strerrordesc_np(err);
    return text ? text : "Unknown error";
}
