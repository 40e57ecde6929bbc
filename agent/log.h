/* Logging (core/log.c). */

#ifndef PPROF_AGENT_LOG_H
#define PPROF_AGENT_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum log_level { LOG_QUIET = 0, LOG_INFO = 1, LOG_DEBUG = 2 };

/* Formats "pprofagent: <message>\n" into a stack buffer and write(2)s it to
 * stderr. Supports %s %c %d %i %u %x %p %% with l, ll, z modifiers. Never
 * allocates, preserves errno. Async-signal-safe. */
/* The text of an error number, as strerror's in the C locale, without
 * the message catalogue's lock (strerror takes it; a fork child could
 * inherit it from the agent's thread, docs/fork.md). Async-signal-safe
 * with glibc. */
const char *log_errtext(int err);
void log_msg(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

/* Formats into buf (always NUL-terminated); returns the length written.
 * Async-signal-safe. Does not allocate. */
size_t log_format(char *buf, size_t size, const char *fmt, va_list ap);
size_t log_snprintf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
