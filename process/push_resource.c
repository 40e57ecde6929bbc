/*
 * The resource of every pushed request: who this process is, in the
 * OpenTelemetry semantic conventions' words (service.name,
 * service.instance.id, host.name, process.pid, process.executable.name
 * and .path, process.command_line), then what the operator adds or
 * overrides in OTEL_RESOURCE_ATTRIBUTES, service.name from
 * OTEL_SERVICE_NAME above all. Runs on the push's threads.
 */
#include "process/push.h"

#include "agent/core/hash.h"
#include "agent/log.h"
#include "agent/host/proc.h"
#include "agent/core/push.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static char instance_id[40];

void push_resource_new_instance(void)
{
    uint64_t r[2];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                    ((uint64_t)getpid() << 40);
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        r[0] = hash_splitmix64(seed);
        r[1] = hash_splitmix64(seed + HASH_GOLDEN);
    }
    uint8_t b[16];
    memcpy(b, r, sizeof b);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* the RFC's variant */
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            instance_id[k++] = '-';
        instance_id[k++] = hex[b[i] >> 4];
        instance_id[k++] = hex[b[i] & 15];
    }
    instance_id[k] = '\0';
}

static void put(struct otlp_kv *out, size_t max, size_t *n, const char *key,
                const char *str, int64_t num)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(out[i].key, key) == 0) {
            out[i].str = str;
            out[i].num = num;
            return;
        }
    if (*n < max)
        out[(*n)++] = (struct otlp_kv){key, str, num};
}

size_t push_resource(struct otlp_kv *out, size_t max, char bufs[6][1024])
{
    size_t n = 0;
    char *exe = bufs[0], *name = bufs[1], *cmd = bufs[2], *host = bufs[3],
         *svc = bufs[4];
    ssize_t len = readlink("/proc/self/exe", exe, 1023);
    exe[len > 0 ? len : 0] = '\0';
    const char *base = strrchr(exe, '/');
    log_snprintf(name, 1024, "%s", base ? base + 1 : exe);
    /* The command line, its arguments joined by spaces. */
    ssize_t c = proc_read("/proc/self/cmdline", cmd, 1023);
    if (c < 0)
        c = 0;
    cmd[c] = '\0';
    while (c > 0 && cmd[c - 1] == '\0')
        c--;
    for (ssize_t i = 0; i < c; i++)
        if (cmd[i] == '\0')
            cmd[i] = ' ';
    if (gethostname(host, 1023) != 0)
        host[0] = '\0';
    host[1023] = '\0';
    if (!instance_id[0])
        push_resource_new_instance();

    put(out, max, &n, "service.instance.id", instance_id, 0);
    if (host[0])
        put(out, max, &n, "host.name", host, 0);
    put(out, max, &n, "process.pid", NULL, (int64_t)getpid());
    put(out, max, &n, "process.executable.name", name, 0);
    if (exe[0])
        put(out, max, &n, "process.executable.path", exe, 0);
    if (cmd[0])
        put(out, max, &n, "process.command_line", cmd, 0);
    put(out, max, &n, "telemetry.sdk.name", "pprofagent", 0);
    put(out, max, &n, "telemetry.sdk.language", "cpp", 0);
    log_snprintf(svc, 1024, "unknown_service:%s", name);
    put(out, max, &n, "service.name", svc, 0);
    for (size_t i = 0; i < opt_push.nattrs; i++)
        put(out, max, &n, opt_push.attrs[i].key, opt_push.attrs[i].value, 0);
    if (opt_push.service[0])
        put(out, max, &n, "service.name", opt_push.service, 0);
    return n;
}
