/*
 * An event loop between short waits, as redis's main thread is under
 * load: the main thread sleeps 200 us, then 300 us, for ever, so the
 * system call /proc shows for it changes every few hundred microseconds.
 * A stack copied while it is blocked is often taken as it moves on
 * (goroutine?debug=2 must try again rather than give up). Prints
 * "ready" once looping.
 */
#include <stdio.h>
#include <time.h>

__attribute__((noinline)) static void wait_short(const struct timespec *t)
{
    nanosleep(t, NULL);
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void event_loop(void)
{
    static const struct timespec a = {0, 200000}, b = {0, 300000};
    for (;;) {
        wait_short(&a);
        wait_short(&b);
    }
}

int main(void)
{
    printf("ready\n");
    fflush(stdout);
    event_loop();
    return 0;
}
