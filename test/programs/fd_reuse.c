/*
 * A daemon's start, as real daemons do it: close every inherited
 * descriptor, then reuse the numbers, and check every byte.
 *
 *   fd_reuse MODE DIR
 *
 * MODE is how the inherited descriptors go: "loop" (close 3 up to the
 * soft limit), "closefrom" or "close_range". Then: a pipe (3 and 4 as the
 * program expects), 4 threads allocating (so the agent captures stacks),
 * a 2 MiB file copied through that pipe, 200,000 numbered records through
 * another, a forked child that closes everything again and writes files,
 * the program's own TCP listener serving PING/PONG to 4 client threads,
 * one request to the agent's port when PPROF_PORT_FILE names it, and
 * dup2/dup3 onto every number that was open before the close. Prints
 * "fd_reuse ok" and exits 0 when every byte written was read back in
 * order; otherwise names the first difference and exits 1.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd_list.h"

#define FILE_BYTES (2 << 20)
#define RECORDS 200000
#define CLIENTS 4
#define PINGS 200

static const char *dir;
static int failures;
static volatile int stop;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fd_reuse: " __VA_ARGS__);                     \
            fprintf(stderr, "\n");                                         \
            failures++;                                                    \
        }                                                                  \
    } while (0)

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads exactly n bytes; the number read (less at end of file). */
static size_t read_all(int fd, void *p, size_t n)
{
    char *c = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, c + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static void path_of(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

/* ---- 1. close what was inherited ------------------------------------------- */

static int inherited[64], ninherited;

static void note_inherited(void)
{
    ninherited = fd_list(inherited, 64);
}

static void close_everything(const char *mode)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (strcmp(mode, "closefrom") == 0)
        closefrom(3);
    else if (strcmp(mode, "close_range") == 0)
        CHECK(close_range(3, ~0U, 0) == 0, "close_range: %s", strerror(errno));
    else
        for (int fd = 3; fd < (int)rl.rlim_cur; fd++)
            close(fd);
}

/* ---- 2. threads that allocate ----------------------------------------------- */

static void *allocator(void *arg)
{
    uintptr_t seed = (uintptr_t)arg;
    while (!stop) {
        void *p[64];
        for (int i = 0; i < 64; i++) {
            seed = seed * 6364136223846793005ULL + 1;
            p[i] = malloc(16 + (seed >> 40) % 4096);
            memset(p[i], (int)i, 16);
        }
        for (int i = 0; i < 64; i++)
            free(p[i]);
    }
    return NULL;
}

/* ---- 3. a file through the pipe ---------------------------------------------- */

struct copy {
    int from, to;
};

static void *copier(void *arg)
{
    struct copy *c = arg;
    char buf[8192];
    ssize_t n;
    while ((n = read(c->from, buf, sizeof buf)) > 0)
        if (write_all(c->to, buf, (size_t)n) != 0)
            break;
    close(c->to);
    return NULL;
}

static void copy_file(int p[2])
{
    char src[1024], dst[1024];
    path_of(src, sizeof src, "src");
    path_of(dst, sizeof dst, "dst");
    unsigned char *data = malloc(FILE_BYTES);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < FILE_BYTES; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        data[i] = (unsigned char)x;
    }
    int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write_all(fd, data, FILE_BYTES) == 0, "write src");
    close(fd);

    struct copy c = {open(src, O_RDONLY), p[1]};
    pthread_t t;
    pthread_create(&t, NULL, copier, &c);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char buf[8192];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0)
        write_all(out, buf, (size_t)n);
    pthread_join(t, NULL);
    close(out);
    close(c.from);
    close(p[0]);

    unsigned char *back = malloc(FILE_BYTES + 1);
    fd = open(dst, O_RDONLY);
    size_t got = read_all(fd, back, FILE_BYTES + 1);
    close(fd);
    CHECK(got == FILE_BYTES, "copy: %zu bytes instead of %d", got, FILE_BYTES);
    for (size_t i = 0; i < got && i < FILE_BYTES; i++)
        if (back[i] != data[i]) {
            CHECK(0, "copy: byte %zu differs", i);
            break;
        }
    free(back);
    free(data);
}

/* ---- 4. numbered records through a pipe -------------------------------------- */

struct record {
    uint32_t seq, inv;
    char text[8];
};

static void *record_writer(void *arg)
{
    int fd = *(int *)arg;
    for (uint32_t i = 0; i < RECORDS; i++) {
        struct record r = {i, ~i, "record"};
        if (write_all(fd, &r, sizeof r) != 0)
            break;
    }
    close(fd);
    return NULL;
}

static void records(void)
{
    int q[2];
    CHECK(pipe(q) == 0, "pipe: %s", strerror(errno));
    pthread_t t;
    pthread_create(&t, NULL, record_writer, &q[1]);
    long bad = 0, n = 0;
    struct record r;
    while (read_all(q[0], &r, sizeof r) == sizeof r) {
        if (r.seq != (uint32_t)n || r.inv != ~(uint32_t)n ||
            strcmp(r.text, "record") != 0)
            bad++;
        n++;
    }
    pthread_join(t, NULL);
    close(q[0]);
    CHECK(n == RECORDS && bad == 0, "records: %ld read, %ld out of order",
          n, bad);
}

/* ---- 5. a forked child writes files ------------------------------------------ */

static void line_of(char *out, size_t size, const char *who, int k, int l)
{
    snprintf(out, size, "%s file %d line %d\n", who, k, l);
}

static void write_files(const char *who)
{
    for (int k = 0; k < 8; k++) {
        char name[64], path[1024], line[64];
        snprintf(name, sizeof name, "%s-%d", who, k);
        path_of(path, sizeof path, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (int l = 0; l < 100; l++) {
            line_of(line, sizeof line, who, k, l);
            write_all(fd, line, strlen(line));
        }
        close(fd);
    }
}

static void check_files(const char *who)
{
    for (int k = 0; k < 8; k++) {
        char name[64], path[1024], want[8192], line[64], got[8192];
        snprintf(name, sizeof name, "%s-%d", who, k);
        path_of(path, sizeof path, name);
        want[0] = '\0';
        for (int l = 0; l < 100; l++) {
            line_of(line, sizeof line, who, k, l);
            strcat(want, line);
        }
        int fd = open(path, O_RDONLY);
        size_t n = fd >= 0 ? read_all(fd, got, sizeof got - 1) : 0;
        close(fd);
        got[n] = '\0';
        CHECK(strcmp(got, want) == 0, "%s: content differs", path);
    }
}

static void forked_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        /* A daemon's child: everything goes, then its own files. */
        closefrom(3);
        pthread_t t;
        pthread_create(&t, NULL, allocator, (void *)7);
        write_files("child");
        stop = 1;
        pthread_join(t, NULL);
        _exit(0);
    }
    write_files("parent");
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "child status %d", st);
    check_files("child");
    check_files("parent");
}

/* ---- 6. the program's own TCP listener ---------------------------------------- */

static int listener;
static int listen_port;

static void *server(void *unused)
{
    (void)unused;
    for (int c = 0; c < CLIENTS; c++) {
        int s = accept(listener, NULL, NULL);
        if (s < 0)
            break;
        FILE *in = fdopen(dup(s), "r");
        char line[64];
        while (in && fgets(line, sizeof line, in)) {
            int i;
            if (sscanf(line, "PING %d", &i) != 1)
                break;
            char reply[64];
            snprintf(reply, sizeof reply, "PONG %d\n", i);
            write_all(s, reply, strlen(reply));
        }
        if (in)
            fclose(in);
        close(s);
    }
    return NULL;
}

static int answered;

static void *client(void *arg)
{
    int id = (int)(intptr_t)arg;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)listen_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return NULL;
    }
    FILE *in = fdopen(dup(s), "r");
    for (int i = 0; i < PINGS; i++) {
        char msg[64], want[64], got[64] = "";
        snprintf(msg, sizeof msg, "PING %d\n", id * 1000 + i);
        snprintf(want, sizeof want, "PONG %d\n", id * 1000 + i);
        write_all(s, msg, strlen(msg));
        if (!fgets(got, sizeof got, in) || strcmp(got, want) != 0) {
            fprintf(stderr, "fd_reuse: client %d got '%.40s'\n", id, got);
            break;
        }
        __atomic_fetch_add(&answered, 1, __ATOMIC_RELAXED);
    }
    fclose(in);
    close(s);
    return NULL;
}

static void own_listener(void)
{
    listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    CHECK(bind(listener, (struct sockaddr *)&a, sizeof a) == 0 &&
              listen(listener, 16) == 0 &&
              getsockname(listener, (struct sockaddr *)&a, &len) == 0,
          "listen: %s", strerror(errno));
    listen_port = ntohs(a.sin_port);
    pthread_t srv, cl[CLIENTS];
    pthread_create(&srv, NULL, server, NULL);
    /* One client at a time: the server serves them in turn. */
    for (int c = 0; c < CLIENTS; c++) {
        pthread_create(&cl[c], NULL, client, (void *)(intptr_t)c);
        pthread_join(cl[c], NULL);
    }
    pthread_join(srv, NULL);
    close(listener);
    CHECK(answered == CLIENTS * PINGS, "listener: %d of %d pings answered",
          answered, CLIENTS * PINGS);
}

/* ---- 7. the agent still answers ----------------------------------------------- */

static char agent_addr[128];

static void read_agent_addr(void)
{
    const char *f = getenv("PPROF_PORT_FILE");
    if (!f)
        return;
    int fd = open(f, O_RDONLY);
    if (fd < 0)
        return;
    size_t n = read_all(fd, agent_addr, sizeof agent_addr - 1);
    agent_addr[n] = '\0';
    close(fd);
}

static void query_agent(void)
{
    char *colon = strrchr(agent_addr, ':');
    if (!colon)
        return;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)atoi(colon + 1)),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(connect(s, (struct sockaddr *)&a, sizeof a) == 0,
          "agent: connect: %s", strerror(errno));
    const char req[] = "GET /debug/pprof/cmdline HTTP/1.0\r\n\r\n";
    write_all(s, req, sizeof req - 1);
    char reply[4096];
    size_t n = read_all(s, reply, sizeof reply - 1);
    reply[n] = '\0';
    close(s);
    CHECK(strncmp(reply, "HTTP/1.1 200", 12) == 0 && strstr(reply, "fd_reuse"),
          "agent: answered '%.60s'", reply);
}

/* ---- 8. dup2 and dup3 onto the numbers that were open ----------------------- */

static void dup_onto_inherited(void)
{
    for (int i = 0; i < ninherited; i++) {
        int n = inherited[i];
        char name[64], path[1024], want[64], got[64];
        snprintf(name, sizeof name, "dup-%d", n);
        path_of(path, sizeof path, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int r = (i & 1) ? dup3(fd, n, O_CLOEXEC) : dup2(fd, n);
        CHECK(r == n, "dup onto %d returned %d (%s)", n, r, strerror(errno));
        snprintf(want, sizeof want, "written through %d\n", n);
        CHECK(write_all(n, want, strlen(want)) == 0, "write to %d", n);
        CHECK(close(n) == 0, "close(%d): %s", n, strerror(errno));
        close(fd);
        fd = open(path, O_RDONLY);
        size_t got_n = read_all(fd, got, sizeof got - 1);
        got[got_n] = '\0';
        close(fd);
        CHECK(strcmp(got, want) == 0, "%s: '%s'", path, got);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: fd_reuse loop|closefrom|close_range DIR\n");
        return 2;
    }
    dir = argv[2];
    read_agent_addr();
    note_inherited();
    close_everything(argv[1]);

    int p[2];
    CHECK(pipe(p) == 0 && p[0] == 3 && p[1] == 4, "pipe got %d/%d", p[0],
          p[1]);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, allocator, (void *)(uintptr_t)(i + 1));
    copy_file(p);
    records();
    forked_child();
    own_listener();
    if (agent_addr[0])
        query_agent();
    dup_onto_inherited();
    /* The agent keeps working after its numbers were taken. */
    records();
    stop = 1;
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("fd_reuse %s: %d inherited, %d pings\n",
           failures ? "FAILED" : "ok", ninherited, answered);
    return failures ? 1 : 0;
}
