/*
 * A thread that runs on a stack of its own making, as Erlang's JIT runs
 * its code with the stack pointer in the Erlang process's memory: its
 * stack pointer is outside the thread's stack, so only the interrupted
 * instruction of a sample is known. The thread "offstack" switches
 * (swapcontext) to a malloc'd stack and burns in offstack_burn there.
 *
 *   offstack SECONDS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include "spin.h"
#include "timing.h"

static ucontext_t back, there;
static long run_ns;

__attribute__((noinline)) void offstack_burn(long n) { spin(n); }

static void on_own_stack(void)
{
    long start = now_ns();
    while (now_ns() - start < run_ns)
        offstack_burn(100000);
}

static void *offstack(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "offstack");
    size_t size = 1 << 20;
    getcontext(&there);
    there.uc_stack.ss_sp = malloc(size);
    there.uc_stack.ss_size = size;
    there.uc_link = &back;
    makecontext(&there, on_own_stack, 0);
    swapcontext(&back, &there);
    return NULL;
}

int main(int argc, char **argv)
{
    run_ns = (argc > 1 ? atol(argv[1]) : 60) * 1000000000L;
    pthread_t t;
    pthread_create(&t, NULL, offstack, NULL);
    printf("ready\n");
    fflush(stdout);
    pthread_join(t, NULL);
    return 0;
}
