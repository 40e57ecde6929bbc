/*
 * Unit tests for agent/core/config_push.c: the OpenTelemetry exporter's
 * settings as PPROF_PUSH=otlp reads them (endpoints, the path appended to
 * the generic one, ports, IPv6 hosts, headers and resource attributes
 * percent-decoded, the _PROFILES_ variables winning), and every bad value
 * leaving the push off.
 */
#include "agent/core/push.h"
#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>

static const char *const vars[] = {
    "PPROF_PUSH", "PPROF_PUSH_INTERVAL", "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_PROFILES_TIMEOUT", "OTEL_EXPORTER_OTLP_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_PROFILES_CERTIFICATE", "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES", NULL};

/* Loads with only PPROF_PUSH=otlp and the pairs given (name, value, ...,
 * NULL). Returns opt_push.on. */
static int load(const char *first, ...)
{
    for (size_t i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    setenv("PPROF_PUSH", "otlp", 1);
    va_list ap;
    va_start(ap, first);
    for (const char *name = first; name; name = va_arg(ap, const char *))
        setenv(name, va_arg(ap, const char *), 1);
    va_end(ap);
    opt_push = (struct push_config){0};
    config_load_push();
    return opt_push.on;
}

TEST(defaults)
{
    expect_int_eq(load(NULL), 1);
    expect_str_eq(opt_push.url, "http://localhost:4318/v1development/profiles");
    expect_str_eq(opt_push.host, "localhost");
    expect_str_eq(opt_push.port, "4318");
    expect_str_eq(opt_push.path, "/v1development/profiles");
    expect_int_eq(opt_push.tls, 0);
    expect_int_eq(opt_push.timeout_ms, 10000);
    expect_int_eq(opt_push.interval_s, 15);
    unsetenv("PPROF_PUSH");
    opt_push = (struct push_config){0};
    config_load_push();
    expect_int_eq(opt_push.on, 0);
}

TEST(endpoints)
{
    expect_int_eq(load("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c.example/otlp/",
                       NULL), 1);
    expect_str_eq(opt_push.path, "/otlp/v1development/profiles");
    expect_str_eq(opt_push.port, "443");
    expect_int_eq(opt_push.tls, 1);
    expect_int_eq(load("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1]:9",
                       "OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT",
                       "http://[::1]:4319/x", NULL), 1);
    expect_str_eq(opt_push.host, "::1");
    expect_str_eq(opt_push.port, "4319");
    expect_str_eq(opt_push.path, "/x");
}

TEST(lists)
{
    expect_int_eq(load("OTEL_EXPORTER_OTLP_HEADERS",
                       "a=b%20c, Authorization = Bearer%20x%3D",
                       "OTEL_RESOURCE_ATTRIBUTES", "team=prof%20ilers,k=v",
                       "OTEL_SERVICE_NAME", "svc", NULL), 1);
    expect_int_eq(opt_push.nheaders, 2);
    expect_str_eq(opt_push.headers[0].key, "a");
    expect_str_eq(opt_push.headers[0].value, "b c");
    expect_str_eq(opt_push.headers[1].key, "Authorization");
    expect_str_eq(opt_push.headers[1].value, "Bearer x=");
    expect_int_eq(opt_push.nattrs, 2);
    expect_str_eq(opt_push.attrs[0].value, "prof ilers");
    expect_str_eq(opt_push.service, "svc");
    expect_int_eq(load("OTEL_EXPORTER_OTLP_HEADERS", "a=1",
                       "OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "b=2", NULL), 1);
    expect_str_eq(opt_push.headers[0].key, "b");
}

TEST(bad_values_leave_it_off)
{
    expect_int_eq(load("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://h", NULL), 0);
    expect_int_eq(load("OTEL_EXPORTER_OTLP_ENDPOINT", "http://", NULL), 0);
    expect_int_eq(load("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:99999", NULL), 0);
    expect_int_eq(load("OTEL_EXPORTER_OTLP_ENDPOINT", "http://u@h", NULL), 0);
    expect_int_eq(load("OTEL_EXPORTER_OTLP_HEADERS", "bad name=x", NULL), 0);
    expect_int_eq(load("OTEL_EXPORTER_OTLP_HEADERS", "a=%zz", NULL), 0);
    expect_int_eq(load("OTEL_EXPORTER_OTLP_HEADERS", "a=%0d%0a", NULL), 0);
    expect_int_eq(load("OTEL_RESOURCE_ATTRIBUTES", "novalue", NULL), 0);
    expect_int_eq(load("OTEL_EXPORTER_OTLP_TIMEOUT", "0", NULL), 0);
    expect_int_eq(load("PPROF_PUSH_INTERVAL", "+5", NULL), 0);
    expect_int_eq(load("OTEL_EXPORTER_OTLP_CERTIFICATE", "ca.pem", NULL), 0);
    for (size_t i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    setenv("PPROF_PUSH", "yes", 1);
    opt_push = (struct push_config){0};
    config_load_push();
    expect_int_eq(opt_push.on, 0);
}

TEST(percent_decode)
{
    char out[8];
    expect_int_eq(push_percent_decode("a%41", 4, out, sizeof out), 0);
    expect_str_eq(out, "aA");
    expect_true(push_percent_decode("%4", 2, out, sizeof out) != 0);
    expect_true(push_percent_decode("%00", 3, out, sizeof out) != 0);
    expect_true(push_percent_decode("123456789", 9, out, sizeof out) != 0);
}

int main(void)
{
    return run_tests(defaults, endpoints, lists, bad_values_leave_it_off,
                     percent_decode, NULL);
}
