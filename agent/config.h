/* Configuration (core/config.c), read once by the constructor. */

#ifndef PPROF_AGENT_CONFIG_H
#define PPROF_AGENT_CONFIG_H

#include <stddef.h>

extern int opt_enable;           /* PPROF_ENABLE: 0 = pure pass-through */
extern int opt_serve;            /* 0 when PPROF_ADDR=off */
extern char opt_addr[256];       /* PPROF_ADDR as civetweb wants it */
extern char opt_addr_shown[256]; /* PPROF_ADDR as the user wrote it */
extern int opt_addr_loopback;    /* the address is on the loopback */
extern int opt_addr_ipv6;        /* the address is a bracketed IPv6 literal */
extern char opt_port_file[1024]; /* PPROF_PORT_FILE or "" */
extern char opt_token[256];      /* PPROF_TOKEN or "" */
extern int opt_log_level;        /* PPROF_LOG */
extern long opt_heap_rate;       /* PPROF_HEAP_RATE, bytes; 0 = off */
extern int opt_cpu_hz;           /* PPROF_CPU_HZ */
extern int opt_cpu_sampler;      /* PPROF_CPU_SAMPLER: CPU_SAMPLER_* below */
extern int opt_wall_hz;          /* PPROF_WALL_HZ */
extern long opt_wall_cost;       /* PPROF_WALL_COST, thousandths */
extern long opt_mutex_fraction;  /* PPROF_MUTEX_FRACTION; 0 = off */
extern long opt_block_rate;      /* PPROF_BLOCK_RATE, ns; 0 = off */
extern char opt_debug_dir[4096]; /* PPROF_DEBUG_DIR: absolute dirs, ':' */

/* What drives the CPU profile's samples (agent/cpu/cpu_perf.c): a per-thread
 * task-clock perf event where the system allows it, else a per-thread CPU
 * timer (auto); or one of them by name. */
enum { CPU_SAMPLER_AUTO = 0, CPU_SAMPLER_TIMER = 1, CPU_SAMPLER_PERF = 2 };

/* Reads and validates every PPROF_* variable; a bad value is reported in
 * one line and replaced by its default. The default log level is quiet
 * when config_exec_child (agent/core/ops.h) is set. Not async-signal-safe. */
void config_load(void);

/* config_load() from entries ("NAME=value", NULL-terminated, which must
 * outlive the agent) instead of the environment: the settings an attach
 * brought. From then on config_env() answers the PPROF_, OTEL_ and XDG_
 * names from them alone, never from the host's environment. Not
 * async-signal-safe. */
void config_load_from(char *const *entries);
/* 1 once config_load_from() ran: the agent was attached to a running
 * process (process/attach.c) and must leave its environment alone. */
extern int config_attached;

/* getenv(name), from the entries config_load gathered while it runs (the
 * environment cannot change under a constructor), from getenv otherwise.
 * Not async-signal-safe. */
const char *config_env(const char *name);

/* Parses a decimal integer in [min, max] from s (whole string).
 * Returns 0 or -EINVAL. Async-signal-safe. Does not allocate. */
int config_parse_long(const char *s, long min, long max, long *out);
/* Copies the n bytes at s (up to a separator found by the caller) into dst
 * as a string, when they fit in size with the NUL. Returns 0 or -EINVAL
 * (dst untouched). Async-signal-safe. Does not allocate. */
int config_copy_prefix(char *dst, size_t size, const char *s, size_t n);

#endif
