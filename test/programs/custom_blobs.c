/*
 * Host for the public API (pprofagent.h), built without the agent and run
 * with or without it:
 *
 * - custom profile "example.com/blobs" (Go's custom-profile example):
 *   open_blob() is called 800 times and adds each handle, then 200 handles
 *   are closed; 600 stay open at open_blob. The program checks the API's
 *   own answers (count, duplicate key, refused names) and prints them.
 * - labels: two "server" threads run requests of two types, each request
 *   under the label endpoint=/api or endpoint=/static, and measure the CPU
 *   time each type really took (thread CPU clock). SIGUSR1 prints
 *   "api=<ns> static=<ns>". Each request allocates a 4 KiB buffer.
 * - named threads (pthread_setname_np) in different states for the threads
 *   profile: a condition-variable waiter, a pipe reader, a sleeper
 *   (nanosleep), and the servers (running).
 *
 *   custom_blobs SECONDS_TO_RUN
 *
 * Prints "agent: present" or "agent: absent" and exits 0 after the time.
 */
#include "agent/pprofagent.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report.h"
#include "spin.h"
#include "timing.h"

static pprof_profile *blobs;
static long long cpu_api, cpu_static; /* ns, atomics */

struct blob {
    int id;
    char data[64];
};

__attribute__((noinline)) struct blob *open_blob(int id)
{
    struct blob *b = calloc(1, sizeof *b);
    b->id = id;
    pprof_profile_add(blobs, b, 0);
    return b;
}

__attribute__((noinline)) void close_blob(struct blob *b)
{
    pprof_profile_remove(blobs, b);
    free(b);
}

/* Both request types run the same code: only the label tells them apart.
 * Each request also allocates a response buffer (heap samples carry the
 * label too). */
__attribute__((noinline)) static void handle_request(long n)
{
    char *response = malloc(4096);
    spin(n);
    if (response) {
        response[0] = (char)sink;
        sink += (unsigned long)response[0];
    }
    free(response);
}

static void *server(void *arg)
{
    char name[16];
    snprintf(name, sizeof name, "server-%d", (int)(long)arg);
    pthread_setname_np(pthread_self(), name);
    unsigned seed = 12345u + (unsigned)(long)arg;
    for (;;) {
        /* 3 requests in 4 to /api, 1 to /static, /static ones bigger:
         * about 60% of the CPU to /api, 40% to /static. The order is
         * random: a fixed pattern of requests shorter than the kernel tick,
         * which is when CPU timers fire, would alias with it and the
         * profile would see some phases of the pattern more than others. */
        int api = rand_r(&seed) % 4 != 3;
        pprof_labels saved = pprof_labels_save();
        pprof_label_set("endpoint", api ? "/api" : "/static");
        long long t0 = thread_cpu_ns();
        handle_request(api ? 100000 : 200000);
        long long dt = thread_cpu_ns() - t0;
        pprof_labels_restore(saved);
        __atomic_fetch_add(api ? &cpu_api : &cpu_static, dt,
                           __ATOMIC_RELAXED);
    }
    return NULL;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

__attribute__((noinline)) static void wait_forever(void)
{
    pthread_mutex_lock(&lock);
    for (;;)
        pthread_cond_wait(&never, &lock);
}

static void *cond_waiter(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "cond-waiter");
    wait_forever();
    return NULL;
}

static int pipe_fds[2];

__attribute__((noinline)) static void read_pipe(void)
{
    char c;
    while (read(pipe_fds[0], &c, 1) != 0)
        ;
}

static void *pipe_reader(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "pipe-reader");
    read_pipe();
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "sleeper");
    /* nanosleep would return EINTR early if a handler ran on this thread:
     * the agent must never interrupt it. Any early return is reported. */
    for (;;) {
        struct timespec t = {3600, 0}, left;
        if (nanosleep(&t, &left) != 0) {
            printf("sleeper: nanosleep interrupted (errno %d)\n", errno);
            fflush(stdout);
        }
    }
    return NULL;
}

static int check_api(int present)
{
    int bad = 0;
    blobs = pprof_profile_new("example.com/blobs");
    if (present != (blobs != NULL)) {
        printf("pprof_profile_new: unexpected %p\n", (void *)blobs);
        bad = 1;
    }
    struct blob *all[800];
    for (int i = 0; i < 800; i++)
        all[i] = open_blob(i);
    for (int i = 0; i < 200; i++)
        close_blob(all[i]);
    long count = pprof_profile_count(blobs);
    printf("blobs open: %ld\n", count);
    if (count != (present ? 600 : 0))
        bad = 1;
    if (present) {
        int dup = pprof_profile_add(blobs, all[500], 0);
        int gone = pprof_profile_remove(blobs, all[0]);
        errno = 0;
        pprof_profile *heap = pprof_profile_new("heap");
        int heap_errno = errno;
        pprof_profile *again = pprof_profile_new("example.com/blobs");
        printf("duplicate add %d, remove of a removed key %d, \"heap\" %s "
               "(errno %d), second \"example.com/blobs\" %s, lookup %s\n",
               dup, gone, heap ? "accepted" : "refused", heap_errno,
               again ? "accepted" : "refused",
               pprof_profile_lookup("example.com/blobs") == blobs ? "ok"
                                                                   : "wrong");
        if (dup != -EEXIST || gone != -ENOENT || heap || heap_errno != EINVAL ||
            again || pprof_profile_lookup("example.com/blobs") != blobs)
            bad = 1;
    }
    return bad;
}

int main(int argc, char **argv)
{
    int run = argc > 1 ? atoi(argv[1]) : 60;
    int present = pprof_agent_loaded();
    printf("agent: %s\n", present ? "present" : "absent");
    int bad = check_api(present);
    printf("api checks: %s\n", bad ? "FAILED" : "ok");
    fflush(stdout);

    report_listen();
    if (pipe(pipe_fds) != 0)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, cond_waiter, NULL);
    pthread_create(&t, NULL, pipe_reader, NULL);
    pthread_create(&t, NULL, sleeper, NULL);
    for (long i = 0; i < 2; i++)
        pthread_create(&t, NULL, server, (void *)i);
    printf("started\n");
    fflush(stdout);

    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        struct timespec now, nap = {0, 20000000};
        nanosleep(&nap, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (report_asked()) {
            printf("api=%lld static=%lld\n",
                   __atomic_load_n(&cpu_api, __ATOMIC_RELAXED),
                   __atomic_load_n(&cpu_static, __ATOMIC_RELAXED));
            fflush(stdout);
        }
        if (now.tv_sec - start.tv_sec >= run)
            return bad;
    }
}
