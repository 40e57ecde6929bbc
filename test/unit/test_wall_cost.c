/*
 * Unit tests for agent/wall/wall_cost.c, the wall profile's cost governor,
 * on a simulated session: ticks every 50 ms (20 Hz), a host that uses a
 * given rate of CPU, a session thread that pays a fixed cost a tick, a
 * cost per look and a cost per read of the process's clock. The governor
 * sees only the clocks, as in the agent.
 */
#include "agent/wall/wall.h"

#include "harness.h"

/* The default, PPROF_WALL_COST=9. */
#define SHARE 0.009

struct sim {
    struct wall_cost g;
    int64_t now, own, host;  /* monotonic, the thread's CPU, the host's */
    double host_rate;        /* host CPU ns per wall ns */
    int64_t rest, look, proc_read; /* the thread's costs, ns */
    uint64_t ticks, looks, full, none;
    int64_t own0, host0;     /* at the start of the measured part */
};

static void sim_init(struct sim *s, double host_rate, int64_t look)
{
    memset(s, 0, sizeof *s);
    wall_cost_init(&s->g, SHARE);
    s->now = 1000000000;
    s->host_rate = host_rate;
    s->rest = 20000;
    s->look = look;
    s->proc_read = 100000;
}

/* One tick among threads; returns the looks made. */
static size_t sim_tick(struct sim *s, size_t threads)
{
    size_t max = threads < WALL_LOOK_MAX ? threads : WALL_LOOK_MAX;
    int64_t proc = -1, cost = 0;
    if (wall_cost_host_due(&s->g, s->now)) {
        proc = s->host + s->own;
        cost = s->proc_read;
    }
    size_t k = wall_cost_plan(&s->g, s->now, s->own, proc, cost, threads);
    s->own += cost + s->rest;
    s->own += (int64_t)k * s->look;
    wall_cost_spent(&s->g, k, (int64_t)k * s->look);
    s->ticks++;
    s->looks += k;
    s->full += k == max;
    s->none += k == 0;
    s->now += 50000000;
    s->host += (int64_t)(s->host_rate * 50000000);
    return k;
}

static void sim_run(struct sim *s, size_t threads, int ticks)
{
    for (int i = 0; i < ticks; i++)
        sim_tick(s, threads);
}

/* Starts the measured part. */
static void sim_mark(struct sim *s)
{
    s->own0 = s->own;
    s->host0 = s->host;
    s->ticks = s->looks = s->full = s->none = 0;
}

static double sim_share(const struct sim *s)
{
    return (double)(s->own - s->own0) / (double)(s->host - s->host0);
}

TEST(first_tick_looks_at_all)
{
    struct sim s;
    sim_init(&s, 0.0, 10000);
    expect_int_eq(sim_tick(&s, 1000), 16);
}

/* 1,000 mostly idle threads: 160 ms of CPU a second, 1% of it 1.6 ms,
 * 0.4 ms of which the ticks' fixed cost. */
TEST(idle_threads_held_to_the_share)
{
    struct sim s;
    sim_init(&s, 0.16, 10000);
    sim_run(&s, 1000, 200);
    sim_mark(&s);
    sim_run(&s, 1000, 400);
    double share = sim_share(&s);
    if (share > SHARE * 1.02 || share < SHARE * 0.9)
        HARNESS_FAIL("share %.4f, aimed at %.4f", share, SHARE);
    /* Every tick all or none; more than the floor. */
    expect_int_eq(s.full + s.none, s.ticks);
    expect_true(s.looks > s.ticks * 2);
    expect_true(s.looks < s.ticks * 16);
}

/* Looks that cost twice as much: half as many. */
TEST(looks_follow_their_cost)
{
    struct sim a, b;
    sim_init(&a, 0.3, 10000);
    sim_init(&b, 0.3, 20000);
    sim_run(&a, 1000, 200);
    sim_run(&b, 1000, 200);
    sim_mark(&a);
    sim_mark(&b);
    sim_run(&a, 1000, 400);
    sim_run(&b, 1000, 400);
    double r = (double)a.looks / (double)b.looks;
    if (r < 1.8 || r > 2.6)
        HARNESS_FAIL("%" PRIu64 " looks at 10 us, %" PRIu64 " at 20 us",
                     a.looks, b.looks);
}

/* A session of threads at the given host CPU rate and look cost, past
 * its first 40 ticks: the counts are of the 400 ticks after those. */
static void sim_steady(struct sim *s, double host_rate, int64_t look,
                       int threads)
{
    sim_init(s, host_rate, look);
    sim_run(s, threads, 40);
    sim_mark(s);
    sim_run(s, threads, 400);
}

/* A busy host: every tick looks at the most. */
TEST(busy_host_gets_every_look)
{
    struct sim s;
    sim_steady(&s, 1.5, 10000, 1000);
    expect_int_eq(s.full, s.ticks);
}

/* Few threads on a host that computes (the truth test's): every thread at
 * every tick. */
TEST(few_threads_every_tick)
{
    struct sim s;
    sim_steady(&s, 1.2, 25000, 5);
    expect_int_eq(s.looks, 5 * s.ticks);
}

/* Few threads on an idle host: still every thread at every tick. */
TEST(few_threads_idle_host_every_tick)
{
    struct sim s;
    sim_steady(&s, 0.001, 25000, 16);
    expect_int_eq(s.looks, 16 * s.ticks);
}

/* An idle host: the floor, one look a tick on average, in batches. */
TEST(idle_host_keeps_the_floor)
{
    struct sim s;
    sim_steady(&s, 0.0, 10000, 1000);
    if (s.looks < 368 || s.looks > 432)
        HARNESS_FAIL("%" PRIu64 " looks in %" PRIu64 " ticks", s.looks,
                     s.ticks);
    expect_int_eq(s.full + s.none, s.ticks);
}

/* The process's clock is read seldom when it costs much of the budget. */
TEST(process_clock_read_seldom)
{
    struct sim s;
    sim_init(&s, 0.16, 10000);
    int reads = 0;
    for (int i = 0; i < 400; i++) {
        reads += wall_cost_host_due(&s.g, s.now);
        sim_tick(&s, 1000);
    }
    /* 100 us a read, a tenth of a 1.4 ms/s budget: every 0.7 s. */
    if (reads < 20 || reads > 40)
        HARNESS_FAIL("%d reads in 20 s", reads);
}

/* PPROF_WALL_COST=0: no limit, every tick makes the most looks. */
TEST(no_limit)
{
    struct sim s;
    sim_init(&s, 0.01, 50000);
    wall_cost_init(&s.g, 0);
    sim_run(&s, 1000, 400);
    expect_int_eq(s.looks, 16 * s.ticks);
}

int main(void)
{
    return run_tests(first_tick_looks_at_all, idle_threads_held_to_the_share,
                     looks_follow_their_cost, busy_host_gets_every_look,
                     few_threads_every_tick, few_threads_idle_host_every_tick,
                     idle_host_keeps_the_floor,
                     process_clock_read_seldom, no_limit, NULL);
}
