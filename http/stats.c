/*
 * /debug/stats: the process at a glance, as JSON, for people and for the
 * charts page (charts.c) that polls it once a second: pid, uptime, RSS,
 * threads, CPU used (total, and as a share of one core since the previous
 * reading), the sampled heap in use (read from the heap profile itself,
 * through a captured sub-request, so it is the very figure `go tool pprof`
 * shows), the allocator's own statistics (glibc's mallinfo2, jemalloc's
 * mallctl or gperftools' MallocExtension, whichever runs the host) and the
 * agent's HTTP responses by status.
 *
 * Also the dispatcher of the pages that live beside /debug/pprof/.
 * Runs on HTTP workers only; reads /proc and calls the allocator's
 * statistics functions, which may take the allocator's internal locks but
 * never the host's.
 */
#include "http/http.h"
#include "agent/core/real.h"

#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/cpu/cpu.h"
#include "agent/host/fds.h"
#include "agent/heap/heap.h"
#include "agent/host/proc.h"
#include "agent/spinlock.h"
#include "agent/stacks/stack_table.h"
#include "agent/core/loader.h"
#include "encoder/encoder.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A reading of the process's CPU clock, to give cpu_percent over the
 * interval since the previous one. Readings closer than STATS_MIN_INTERVAL
 * apart (two pollers) reuse the last figure instead of dividing noise. */
#define STATS_MIN_INTERVAL_NS 500000000LL

static struct {
    spinlock_t lock;
    int64_t wall_ns;
    int64_t cpu_ns;
    double percent;
} last_cpu;

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct proc_stat {
    long threads;
    long rss_pages;
    double start_seconds; /* since boot */
};

/* /proc/self/stat: the fields after the command name, which may itself
 * hold spaces and parentheses, so parsing starts after the last ')'. */
static int read_stat(struct proc_stat *st)
{
    char buf[1024];
    if (proc_read("/proc/self/stat", buf, sizeof buf) < 0)
        return -EIO;
    char *p = strrchr(buf, ')');
    if (!p)
        return -EIO;
    p++;
    /* Field 3 (state) is the first after ')'; we want 20, 22 and 24. */
    unsigned long long v[24] = {0};
    int field = 3;
    char *save = NULL;
    for (char *tok = strtok_r(p, " ", &save); tok && field <= 24;
         tok = strtok_r(NULL, " ", &save), field++)
        if (field >= 4)
            v[field - 1] = strtoull(tok, NULL, 10);
    if (field <= 24)
        return -EIO;
    long tick = sysconf(_SC_CLK_TCK);
    st->threads = (long)v[19];
    st->start_seconds = (double)v[21] / (double)(tick > 0 ? tick : 100);
    st->rss_pages = (long)v[23];
    return 0;
}

static double uptime_seconds(const struct proc_stat *st)
{
    char buf[128];
    if (proc_read("/proc/uptime", buf, sizeof buf) < 0)
        return (double)(agent_now_ns() - agent_start_ns) / 1e9;
    double up = strtod(buf, NULL) - st->start_seconds;
    return up > 0 ? up : 0;
}

/* CPU used as a share of one core since the previous reading (or since
 * the start, for the first). */
static double cpu_percent(int64_t cpu_ns, double uptime)
{
    int64_t now = clock_ns(CLOCK_MONOTONIC);
    double pct;
    spin_lock(&last_cpu.lock);
    if (last_cpu.wall_ns == 0) {
        pct = uptime > 0 ? 100.0 * (double)cpu_ns / 1e9 / uptime : 0;
        last_cpu.wall_ns = now;
        last_cpu.cpu_ns = cpu_ns;
        last_cpu.percent = pct;
    } else if (now - last_cpu.wall_ns >= STATS_MIN_INTERVAL_NS) {
        pct = 100.0 * (double)(cpu_ns - last_cpu.cpu_ns) /
              (double)(now - last_cpu.wall_ns);
        last_cpu.wall_ns = now;
        last_cpu.cpu_ns = cpu_ns;
        last_cpu.percent = pct;
    } else {
        pct = last_cpu.percent;
    }
    spin_unlock(&last_cpu.lock);
    return pct < 0 ? 0 : pct;
}

/* The sampled heap in use, unsampled as /debug/pprof/heap shows it
 * (encoder/heap.c): the same records, added up without encoding them.
 * Returns 0 or -errno. */
static int heap_inuse(int64_t *bytes, int64_t *objects)
{
    if (!heap_buckets)
        return -ENOENT;
    struct stack_snapshot snap;
    struct heap_record *recs;
    size_t n;
    int err = heap_records_take(1, &recs, &n, &snap);
    if (err)
        return err;
    heap_totals(recs, n, opt_heap_rate, bytes, objects);
    real_free(recs);
    stack_snapshot_free(&snap);
    return 0;
}

/* ---- allocator statistics ------------------------------------------------- */

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);

static void put_mallctl(struct pbuf *b, mallctl_fn mallctl, const char *name,
                        const char *key, int last)
{
    size_t v = 0, sz = sizeof v;
    if (mallctl(name, &v, &sz, NULL, 0) == 0)
        pbuf_printf(b, "\"%s\": %zu%s", key, v, last ? "" : ", ");
    else
        pbuf_printf(b, "\"%s\": null%s", key, last ? "" : ", ");
}

/* jemalloc, when the host runs on it: its figures are refreshed by
 * writing the epoch first. */
static int jemalloc_stats(struct pbuf *b)
{
    mallctl_fn mallctl = (mallctl_fn)loader_sym(RTLD_DEFAULT, "mallctl");
    if (!mallctl)
        return 0;
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    mallctl("epoch", &epoch, &sz, &epoch, sz);
    pbuf_puts(b, "{\"name\": \"jemalloc\", ");
    put_mallctl(b, mallctl, "stats.allocated", "allocated_bytes", 0);
    put_mallctl(b, mallctl, "stats.active", "active_bytes", 0);
    put_mallctl(b, mallctl, "stats.resident", "resident_bytes", 0);
    put_mallctl(b, mallctl, "stats.mapped", "mapped_bytes", 0);
    put_mallctl(b, mallctl, "stats.metadata", "metadata_bytes", 0);
    put_mallctl(b, mallctl, "stats.retained", "retained_bytes", 1);
    pbuf_puts(b, "}");
    return 1;
}

typedef int (*tc_property_fn)(const char *, size_t *);

/* gperftools' tcmalloc, through its C interface. */
static int tcmalloc_stats(struct pbuf *b)
{
    tc_property_fn get = (tc_property_fn)loader_sym(
        RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
    if (!get)
        return 0;
    static const char *const props[][2] = {
        {"generic.current_allocated_bytes", "allocated_bytes"},
        {"generic.heap_size", "heap_bytes"},
        {"tcmalloc.pageheap_free_bytes", "free_bytes"},
        {"tcmalloc.pageheap_unmapped_bytes", "unmapped_bytes"},
    };
    pbuf_puts(b, "{\"name\": \"tcmalloc\"");
    for (size_t i = 0; i < sizeof props / sizeof props[0]; i++) {
        size_t v = 0;
        if (get(props[i][0], &v))
            pbuf_printf(b, ", \"%s\": %zu", props[i][1], v);
        else
            pbuf_printf(b, ", \"%s\": null", props[i][1]);
    }
    pbuf_puts(b, "}");
    return 1;
}

typedef struct mallinfo2 (*mallinfo2_fn)(void);

/* glibc's malloc: mallinfo2 (glibc 2.33 and later, looked up so the agent
 * still loads on an older one), which sums every arena. */
static void glibc_stats(struct pbuf *b)
{
    mallinfo2_fn mi2 = (mallinfo2_fn)loader_sym(RTLD_DEFAULT, "mallinfo2");
    if (!mi2) {
        pbuf_puts(b, "{\"name\": \"glibc\", \"error\": \"no mallinfo2\"}");
        return;
    }
    struct mallinfo2 m = mi2();
    pbuf_printf(b,
                "{\"name\": \"glibc\", \"arena_bytes\": %zu, "
                "\"mmap_bytes\": %zu, \"mmap_chunks\": %zu, "
                "\"inuse_bytes\": %zu, \"free_bytes\": %zu, "
                "\"releasable_bytes\": %zu}",
                m.arena, m.hblkhd, m.hblks, m.uordblks + m.hblkhd, m.fordblks,
                m.keepcost);
}

static void put_allocator(struct pbuf *b)
{
    if (!jemalloc_stats(b) && !tcmalloc_stats(b))
        glibc_stats(b);
}

static void put_http(struct pbuf *b)
{
    static const int codes[] = {HTTP_STATUS_CODES};
    long total = 0;
    for (int i = 0; i < 6; i++)
        total += __atomic_load_n(&http_status_counts[i], __ATOMIC_RELAXED);
    pbuf_printf(b, "{\"total\": %ld", total);
    for (int i = 1; i < 6; i++)
        pbuf_printf(b, ", \"%dxx\": %ld", i,
                    __atomic_load_n(&http_status_counts[i], __ATOMIC_RELAXED));
    pbuf_puts(b, ", \"by_code\": {");
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        pbuf_printf(b, "%s\"%d\": %ld", i ? ", " : "", codes[i],
                    __atomic_load_n(&http_status_counts[6 + i],
                                    __ATOMIC_RELAXED));
    pbuf_puts(b, "}}");
}

/* One "kind": "note" pair of the notes' object, JSON-escaped. */
static void put_note(void *arg, const char *kind, const char *text)
{
    struct pbuf *b = arg;
    if (b->oom || !b->data)
        return;
    pbuf_printf(b, "%s\"%s\": \"", b->data[b->len - 1] == '{' ? "" : ", ",
                kind);
    for (const char *p = text; *p; p++) {
        if (*p == '"' || *p == '\\')
            pbuf_printf(b, "\\%c", *p);
        else if ((unsigned char)*p < 0x20)
            pbuf_printf(b, "\\u%04x", (unsigned)*p);
        else
            pbuf_printf(b, "%c", *p);
    }
    pbuf_puts(b, "\"");
}

void handle_stats(struct request *r)
{
    struct proc_stat st = {0};
    int have_stat = read_stat(&st) == 0;
    double uptime = have_stat ? uptime_seconds(&st)
                              : (double)(agent_now_ns() - agent_start_ns) / 1e9;
    int64_t cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    double pct = cpu_percent(cpu_ns, uptime);
    long page = sysconf(_SC_PAGESIZE);

    struct pbuf b = {0};
    pbuf_printf(&b,
                "{\"pid\": %d, \"time_unix_ms\": %lld, "
                "\"uptime_seconds\": %.3f, ",
                (int)getpid(), (long long)(agent_now_ns() / 1000000), uptime);
    if (have_stat)
        pbuf_printf(&b, "\"rss_bytes\": %lld, \"threads\": %ld, ",
                    (long long)st.rss_pages * page, st.threads);
    else
        pbuf_puts(&b, "\"rss_bytes\": null, \"threads\": null, ");
    pbuf_printf(&b,
                "\"cpu_seconds\": %.3f, \"cpu_percent\": %.1f, "
                "\"cpus\": %ld, ",
                (double)cpu_ns / 1e9, pct, sysconf(_SC_NPROCESSORS_ONLN));

    int64_t bytes = 0, objects = 0;
    if (opt_heap_rate > 0 && heap_inuse(&bytes, &objects) == 0)
        pbuf_printf(&b,
                    "\"heap_inuse_bytes\": %lld, \"heap_inuse_objects\": %lld, ",
                    (long long)bytes, (long long)objects);
    else
        pbuf_puts(&b, "\"heap_inuse_bytes\": null, "
                      "\"heap_inuse_objects\": null, ");
    /* Threads the last CPU profile could not see (they block its signal). */
    pbuf_printf(&b, "\"cpu_profile_threads_unseen\": %d, ",
                cpu_profile_unseen());
    /* The last CPU profile's sampler and why (agent/cpu/cpu_perf.c), and
     * how many of its threads each one sampled. */
    int by_perf, by_timer;
    cpu_sampler_counts(&by_perf, &by_timer);
    pbuf_printf(&b,
                "\"cpu_sampler\": \"%s\", \"cpu_sampler_threads\": "
                "{\"perf\": %d, \"timer\": %d}, ",
                cpu_sampler_why(), by_perf, by_timer);
    /* Forks that went ahead while an agent call was still in the fork
     * gate (it did not leave within 2 s): their children may inherit a
     * loader lock held (agent/core/loader.c). */
    pbuf_printf(&b, "\"forks_not_gated\": %lu, ", loader_fork_gave_up());
    pbuf_printf(&b, "\"heap_sampling_rate\": %ld, \"allocator\": ",
                opt_heap_rate);
    put_allocator(&b);
    pbuf_puts(&b, ", \"http_responses\": ");
    put_http(&b);
    /* The agent's counters of its last profiles (Go's profiles carry no
     * such comment). */
    pbuf_puts(&b, ", \"profile_notes\": {");
    notes_each(put_note, &b);
    pbuf_puts(&b, "}");
    pbuf_puts(&b, ", \"push\": ");
    push_status_json(&b);
    pbuf_puts(&b, "}\n");

    if (b.oom)
        http_error(r, 500, "out of memory");
    else
        http_send(r, 200, "application/json", NULL, b.data, b.len);
    pbuf_free(&b);
}
