/*
 * Requests that wait for seconds (a CPU profile, a flame graph, a
 * ?seconds=N delta) run on threads of their own, so that civetweb's two
 * workers are only ever busy for quick requests and the agent's idle
 * footprint stays at three threads. docs/server.md has the design.
 *
 * civetweb's worker has checked the request (token, route, body size);
 * handoff_serve then duplicates the connection's socket into the agent's
 * range (agent/host/fds_handoff.c: civetweb's graceful close of its own number
 * no longer shuts the connection down), copies the request, starts a
 * detached thread and returns, and civetweb closes its number. The thread
 * runs the endpoint's handler, whose response goes through the writer
 * here (headers as on civetweb's path, Content-Length, Connection: close),
 * shuts the socket down, closes it and ends: the pool shrinks back by
 * itself.
 *
 * Bounded: HANDOFF_MAX such requests at once (each holds a thread, a
 * descriptor and its profile's memory); beyond that 503, except a CPU
 * profile that finds another one running, which gets Go's 500 from its
 * handler. When the socket cannot be duplicated or the thread not created,
 * the request runs on civetweb's worker as it did before hand-off.
 *
 * Runs on civetweb's workers (handoff_serve) and on the hand-off threads,
 * all of them the agent's own with every signal blocked; never on the
 * host's threads.
 */
#include "http/http.h"
#include "agent/fork_step.h"
#include "agent/core/real.h"

#include "agent/guard.h"
#include "agent/symbols/symbols.h"
#include "agent/host/fds.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Requests that wait, at once. */
#define HANDOFF_MAX 8
/* Longest a write waits for the client to take bytes (civetweb's
 * request_timeout_ms). */
#define HANDOFF_WRITE_MS 5000

struct handoff {
    int busy;   /* claimed (atomic) */
    int fd;     /* the socket's duplicate: FDS_HELD, re-read at each use */
    int handed; /* fd is the duplicate, to be ended (atomic) */
    int failed; /* a write failed: the rest of the response is dropped */
    int cpu;    /* a CPU profile, counted in cpu_profiles */
    void (*handle)(struct request *r);
    struct request r; /* strings and body owned here */
    struct response_out out;
};

static struct handoff slots[HANDOFF_MAX];
/* CPU profiles among the requests that wait (see handoff_serve). */
static int cpu_profiles;

static struct handoff *claim(void)
{
    for (int i = 0; i < HANDOFF_MAX; i++) {
        int free_ = 0;
        if (__atomic_compare_exchange_n(&slots[i].busy, &free_, 1, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return &slots[i];
    }
    return NULL;
}

static void drop(struct handoff *h)
{
    real_free((char *)h->r.method);
    real_free((char *)h->r.name);
    real_free((char *)h->r.query);
    real_free(h->r.body);
    memset(&h->r, 0, sizeof h->r);
    if (h->cpu)
        __atomic_sub_fetch(&cpu_profiles, 1, __ATOMIC_SEQ_CST);
    h->cpu = 0;
    __atomic_store_n(&h->busy, 0, __ATOMIC_RELEASE);
}

/* The response writer of a handed-off request: the whole of data, each
 * wait for the client at most HANDOFF_WRITE_MS. poll and MSG_DONTWAIT
 * because civetweb's close switches the shared socket to blocking mode at
 * a moment of its own. */
static int socket_write(void *ctx, const void *data, size_t len)
{
    struct handoff *h = ctx;
    const char *p = data;
    while (len > 0 && !h->failed) {
        int fd = __atomic_load_n(&h->fd, __ATOMIC_ACQUIRE);
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int n = real_poll(&pfd, 1, HANDOFF_WRITE_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || !(pfd.revents & POLLOUT)) {
            h->failed = 1;
            break;
        }
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (w <= 0) {
            h->failed = 1;
            break;
        }
        p += w;
        len -= (size_t)w;
    }
    return h->failed ? -1 : 0;
}

static int socket_of(void *ctx)
{
    struct handoff *h = ctx;
    return __atomic_load_n(&h->fd, __ATOMIC_ACQUIRE);
}

AGENT_THREAD_MAIN(handoff_thread)
static void *handoff_thread_run(void *p)
{
    struct handoff *h = p;
    real_pthread_setname_np(pthread_self(), "pprofagent-long");
    h->handle(&h->r);
    symbols_release(); /* what the answer loaded, as after any request */
    /* The response is whole: the FIN after it, then the descriptor goes
     * (civetweb on Linux closes the same way, without reading what the
     * client may still send). */
    shutdown(__atomic_load_n(&h->fd, __ATOMIC_ACQUIRE), SHUT_WR);
    __atomic_store_n(&h->handed, 0, __ATOMIC_RELEASE);
    fds_hand_off_end(&h->fd);
    drop(h);
    return NULL;
}

static char *copy(const char *s) { return strdup(s ? s : ""); }

/* Hands r over to a new thread; 0, or -1 with nothing started (r and its
 * connection are still civetweb's worker's). */
static int start(struct handoff *h, struct request *r,
                 void (*handle)(struct request *r))
{
    h->fd = -1;
    h->failed = 0;
    h->handle = handle;
    h->out.write = socket_write;
    h->out.socket = socket_of;
    h->out.ctx = h;
    h->r = (struct request){
        .out = &h->out,
        .method = copy(r->method),
        .name = copy(r->name),
        .query = copy(r->query),
        .body_len = r->body_len,
        .form_body = r->form_body,
        .route = r->route,
    };
    if (!h->r.method || !h->r.name || !h->r.query)
        goto fail;
    int fd = http_client_socket(r);
    if (fd < 0 || fds_hand_off(fd, &h->fd) != 0)
        goto fail;
    __atomic_store_n(&h->handed, 1, __ATOMIC_RELEASE);

    h->r.body = r->body; /* the thread's from now on */
    if (agent_thread_spawn(handoff_thread, h, NULL) != 0) {
        h->r.body = NULL;
        __atomic_store_n(&h->handed, 0, __ATOMIC_RELEASE);
        fds_hand_off_end(&h->fd);
        goto fail;
    }
    r->body = NULL;
    return 0;
fail:
    real_free((char *)h->r.method);
    real_free((char *)h->r.name);
    real_free((char *)h->r.query);
    memset(&h->r, 0, sizeof h->r);
    return -1;
}

void handoff_serve(struct request *r, void (*handle)(struct request *r),
                   int cpu)
{
    /* A CPU profile counts itself first, so that a second one that finds
     * every slot taken also finds the first counted and gets Go's answer
     * (its handler refuses it at once: 500) rather than 503. */
    if (cpu)
        __atomic_add_fetch(&cpu_profiles, 1, __ATOMIC_SEQ_CST);
    struct handoff *h = claim();
    if (!h) {
        int other_cpu =
            cpu && __atomic_load_n(&cpu_profiles, __ATOMIC_SEQ_CST) > 1;
        if (cpu)
            __atomic_sub_fetch(&cpu_profiles, 1, __ATOMIC_SEQ_CST);
        if (other_cpu)
            handle(r);
        else
            http_error(r, 503,
                       "too many profiles in progress; try again when one "
                       "ends");
        return;
    }
    h->cpu = cpu;
    if (start(h, r, handle) == 0)
        return;
    /* On this worker, as before hand-off; the slot still counts it. */
    handle(r);
    drop(h);
}

FORK_PATH void handoff_fork_child(void)
{
    /* The parent's hand-off threads are not the child's: their
     * descriptors go (their strings stay allocated: freeing is not
     * async-signal-safe). */
    for (int i = 0; i < HANDOFF_MAX; i++) {
        /* A free slot is filled when claimed: left as it is. */
        if (!slots[i].busy && !slots[i].handed)
            continue;
        if (slots[i].handed)
            fds_hand_off_end(&slots[i].fd);
        memset(&slots[i], 0, sizeof slots[i]);
        slots[i].fd = -1;
    }
    FORK_SET(cpu_profiles, 0);
}
