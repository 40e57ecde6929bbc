/*
 * A host that calls every family of C-library functions the agent
 * interposes, with results that do not depend on timing, addresses or
 * pids: test/integration/musl_host.sh builds it against musl (musl-gcc)
 * and checks that under the agent its output and exit status are those
 * of a run without it. It is plain C and builds against glibc too.
 *
 *   musl_host          the calls
 *   musl_host where    which object defines the functions it calls
 *
 * Prints one line per family ("malloc 1000", "threads 40000 4 28", ...)
 * and "done"; exits 3 when every check held (a status a crash or a
 * refused start cannot fake), 1 otherwise. With "where": one line per
 * function, its name and the file name of the object whose definition
 * the program calls (the agent's, when it interposes).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("FAILED: %s\n", what);
        failures++;
    }
}

static void heap(void)
{
    size_t total = 0;
    for (int round = 0; round < 1000; round++) {
        char *a = malloc(100 + round);
        char *b = calloc(10, 100);
        check(a && b && b[999] == 0, "malloc/calloc");
        memset(a, 'x', 100 + round);
        a = realloc(a, 5000 + round);
        check(a && a[99] == 'x', "realloc");
        total += malloc_usable_size(a) >= 5000u + round;
        free(a);
        free(b);
    }
    void *p = NULL;
    check(posix_memalign(&p, 256, 1000) == 0 && ((size_t)p & 255) == 0,
          "posix_memalign");
    free(p);
    p = aligned_alloc(64, 640);
    check(p && ((size_t)p & 63) == 0, "aligned_alloc");
    free(p);
    p = memalign(4096, 100);
    check(p && ((size_t)p & 4095) == 0, "memalign");
    free(p);
    printf("malloc %zu\n", total);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t rwlock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
static pthread_barrier_t barrier;
static long counter, read_sum;

static void *worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 10000; i++) {
        pthread_mutex_lock(&lock);
        counter++;
        pthread_mutex_unlock(&lock);
        pthread_rwlock_rdlock(&rwlock);
        read_sum += 0;
        pthread_rwlock_unlock(&rwlock);
        pthread_spin_lock(&spin);
        pthread_spin_unlock(&spin);
    }
    pthread_rwlock_wrlock(&rwlock);
    read_sum++;
    pthread_rwlock_unlock(&rwlock);
    return (void *)7;
}

static void threads(void)
{
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    pthread_barrier_init(&barrier, NULL, 4);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        check(pthread_create(&t[i], NULL, worker, NULL) == 0,
              "pthread_create");
    long joined = 0;
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        joined += (long)r;
    }
    printf("threads %ld %ld %ld\n", counter, read_sum, joined);
}

static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int ready;
static sem_t sem;

static void *signaller(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    ready = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&lock);
    sem_post(&sem);
    return NULL;
}

static void waits(void)
{
    sem_init(&sem, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, signaller, NULL);
    pthread_mutex_lock(&lock);
    while (!ready)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    sem_wait(&sem);
    pthread_join(t, NULL);
    struct timespec soon;
    clock_gettime(CLOCK_REALTIME, &soon);
    soon.tv_nsec += 1000000;
    if (soon.tv_nsec >= 1000000000) {
        soon.tv_sec++;
        soon.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&lock);
    int r = pthread_cond_timedwait(&cond, &lock, &soon);
    pthread_mutex_unlock(&lock);
    int s = sem_timedwait(&sem, &soon) == -1 ? errno : 0;
    check(pthread_mutex_trylock(&lock) == 0, "trylock");
    check(pthread_mutex_timedlock(&lock, &soon) == ETIMEDOUT ||
              pthread_mutex_timedlock(&lock, &soon) == EDEADLK,
          "timedlock");
    pthread_mutex_unlock(&lock);
    printf("waits %s %s\n", r == ETIMEDOUT ? "timedout" : "?",
           s == ETIMEDOUT ? "timedout" : "?");
}

static void descriptors(void)
{
    int p[2];
    check(pipe2(p, O_CLOEXEC) == 0, "pipe2");
    check(write(p[1], "abc", 3) == 3, "write");
    struct iovec iov = {.iov_base = "def", .iov_len = 3};
    check(writev(p[1], &iov, 1) == 3, "writev");
    char buf[16] = "";
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    check(poll(&pf, 1, 1000) == 1, "poll");
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(p[0], &rs);
    struct timeval tv = {1, 0};
    check(select(p[0] + 1, &rs, NULL, NULL, &tv) == 1, "select");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN}, out;
    epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev);
    check(epoll_wait(ep, &out, 1, 1000) == 1, "epoll_wait");
    close(ep);
    check(read(p[0], buf, 6) == 6, "read");
    int d = dup2(p[0], 100);
    int d3 = dup3(p[1], 101, O_CLOEXEC);
    check(d == 100 && d3 == 101, "dup2/dup3");
    close(d);
    close(d3);
    close(p[0]);
    close(p[1]);
    int sv[2];
    check(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    send(sv[0], "ghi", 3, 0);
    char sb[8] = "";
    recv(sv[1], sb, 3, 0);
    sendto(sv[0], "jk", 2, 0, NULL, 0);
    recvfrom(sv[1], sb + 3, 2, 0, NULL, NULL);
    shutdown(sv[0], SHUT_RDWR);
    close(sv[0]);
    close(sv[1]);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    check(s >= 0, "socket");
    close(s);
    FILE *f = tmpfile();
    check(f && pwrite(fileno(f), "lmn", 3, 10) == 3, "pwrite");
    char fb[4] = "";
    check(pread(fileno(f), fb, 3, 10) == 3 && fsync(fileno(f)) == 0,
          "pread/fsync");
    fclose(f);
    printf("descriptors %s %s %s\n", buf, sb, fb);
}

static int phdr_count(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    ++*(int *)data;
    return 0;
}

static void process(void)
{
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    check(pthread_sigmask(SIG_BLOCK, &set, &old) == 0, "pthread_sigmask");
    check(sigprocmask(SIG_SETMASK, &old, NULL) == 0, "sigprocmask");
    check(syscall(SYS_getpid) == getpid(), "syscall");
    char name[16] = "";
    pthread_setname_np(pthread_self(), "musl-host");
    prctl(PR_GET_NAME, name);
    check(setuid(getuid()) == 0 && setgid(getgid()) == 0, "setuid");
    int objects = 0;
    dl_iterate_phdr(phdr_count, &objects);
    check(objects > 0, "dl_iterate_phdr");
    struct timespec nap = {0, 1000000};
    nanosleep(&nap, NULL);
    clock_nanosleep(CLOCK_MONOTONIC, 0, &nap, NULL);
    usleep(1000);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char *p = malloc(10);
        free(p);
        _exit(42);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    printf("process %s %d\n", name, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* The object whose definition of each function the program calls. */
static void where(void)
{
    static const struct {
        const char *name;
        void *fn;
    } fns[] = {
        {"malloc", (void *)malloc},
        {"free", (void *)free},
        {"pthread_create", (void *)pthread_create},
        {"pthread_mutex_lock", (void *)pthread_mutex_lock},
        {"close", (void *)close},
        {"fork", (void *)fork},
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        Dl_info info;
        const char *file = dladdr(fns[i].fn, &info) && info.dli_fname
                               ? info.dli_fname
                               : "?";
        const char *slash = strrchr(file, '/');
        printf("%s %s\n", fns[i].name, slash ? slash + 1 : file);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "where") == 0) {
        where();
        return 0;
    }
    heap();
    threads();
    waits();
    descriptors();
    process();
    printf("done\n");
    return failures ? 1 : 3;
}
