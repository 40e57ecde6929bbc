/*
 * An io_uring program (raw system calls, no liburing): the kernel never
 * restarts io_uring_enter after a signal handler ran, so a signal that
 * arrives while it waits makes it fail with EINTR, which such programs
 * often treat as an error.
 *
 *   uring_wait SECONDS
 *
 * The thread "uring" alternates about 0.5 ms of CPU in uring_burn with a
 * wait in io_uring_enter for a 1 ms timeout request, for SECONDS; then
 * prints "rounds=N eintr=N" (waits interrupted, each retried) and exits 0.
 * Prints "ready" once the ring works; "no io_uring: ..." and exit 3 when
 * the kernel refuses it.
 */
#include <errno.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spin.h"
#include "timing.h"

static long run_ns;

__attribute__((noinline)) void uring_burn(long n) { spin(n); }

struct ring {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail;
    struct io_uring_sqe *sqes;
};

static int ring_open(struct ring *r)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    r->fd = (int)syscall(SYS_io_uring_setup, 4, &p);
    if (r->fd < 0)
        return -1;
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                    r->fd, IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                    r->fd, IORING_OFF_CQ_RING);
    r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
                   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
                   IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED)
        return -1;
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    return 0;
}

/* One 1 ms timeout, waited for; EINTRs counted in *eintr. */
static int wait_once(struct ring *r, long *eintr)
{
    static struct __kernel_timespec ts = {0, 1000000};
    unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask;
    struct io_uring_sqe *e = &r->sqes[idx];
    memset(e, 0, sizeof *e);
    e->opcode = IORING_OP_TIMEOUT;
    e->addr = (unsigned long)&ts;
    e->len = 1;
    r->sq_array[idx] = idx;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
    /* Submitted alone: a call that submits returns the count submitted
     * even when its wait was interrupted, so the wait is a call of its own
     * (as liburing's io_uring_wait_cqe). */
    if (syscall(SYS_io_uring_enter, r->fd, 1, 0, 0, NULL, 0) != 1)
        return -1;
    for (;;) {
        long n = syscall(SYS_io_uring_enter, r->fd, 0, 1,
                         IORING_ENTER_GETEVENTS, NULL, 0);
        if (n < 0 && errno == EINTR)
            (*eintr)++;
        else if (n < 0)
            return -1;
        unsigned head = *r->cq_head;
        if (head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
            __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
            return 0;
        }
    }
}

static void *uring(void *arg)
{
    struct ring *r = arg;
    pthread_setname_np(pthread_self(), "uring");
    long rounds = 0, eintr = 0, start = now_ns();
    while (now_ns() - start < run_ns) {
        uring_burn(200000);
        if (wait_once(r, &eintr) != 0) {
            perror("io_uring_enter");
            exit(2);
        }
        rounds++;
    }
    printf("rounds=%ld eintr=%ld\n", rounds, eintr);
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv)
{
    run_ns = (argc > 1 ? atol(argv[1]) : 10) * 1000000000L;
    struct ring r;
    if (ring_open(&r) != 0) {
        printf("no io_uring: %s\n", strerror(errno));
        return 3;
    }
    printf("ready\n");
    fflush(stdout);
    pthread_t t;
    pthread_create(&t, NULL, uring, &r);
    pthread_join(t, NULL);
    return 0;
}
