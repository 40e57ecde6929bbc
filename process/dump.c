/*
 * Profiles to files (PPROF_DUMP_DIR), for batch jobs and programs that
 * live seconds: a CPU profile of the whole run (started here, at load) and
 * a heap profile, written at exit (exit() and return from main), whenever
 * the operator sends PPROF_DUMP_SIGNAL, and every PPROF_DUMP_INTERVAL
 * seconds. Files are named <program>-<pid>-<UTC time>.<cpu|heap>.pb.gz and,
 * with the flight recorder on (PPROF_TRACE_FLIGHT), .trace (Go's execution
 * trace of the last seconds, for `go tool trace`); they appear whole: each is written under a temporary name in the same folder,
 * flushed, then renamed.
 *
 * Contexts: dump_start() in the constructor (or a forked child's starter
 * thread); the signal handler anywhere (it only writes a byte to a pipe);
 * the dump thread, one of the agent's, drains the CPU samples once a second
 * and writes the signal and interval dumps; the exit dump runs in the
 * host's exit path, on the thread that called exit(). dump_lock keeps the
 * dump thread and the exit path apart; it is never taken in signal context.
 *
 * The CPU profile occupies the agent's one CPU profile slot for the whole
 * run, so /debug/pprof/profile answers "already in use" meanwhile. The
 * signal is never taken from the host: the handler is installed only when
 * the signal is at its default disposition, and a host that installs its
 * own later simply replaces it (the dump thread notices and says so once).
 */
#include "process/process.h"
#include "agent/core/real.h"
#include "agent/fork_step.h"

#include "agent/core/clock.h"
#include "agent/config.h"
#include "agent/guard.h"
#include "agent/log.h"
#include "agent/stacks/stack.h"
#include "agent/spinlock.h"
#include "agent/stacks/stack_table.h"
#include "agent/symbols/symbols.h"
#include "agent/host/fds.h"
#include "agent/host/signals.h"
#include "agent/cpu/cpu.h"
#include "agent/heap/heap.h"
#include "agent/locks/deadlock.h"
#include "agent/heap/memory.h"
#include "agent/threads/threads.h"
#include "agent/trace/trace.h"
#include "encoder/encoder.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

long dump_files_written;

static spinlock_t dump_lock;
static int started;          /* dump_start() ran in this process */
static int cpu_running;      /* the whole-run CPU profile is ours */
static struct cpu_agg *cpu_agg;
static int64_t cpu_start_ns;
static int exit_registered;
static int exited;           /* the exit dump was written */

/* The signal handler and the pipe it writes to (dump_wake_pipe, both ends
 * non-blocking) are in dump_signal.c. */
static struct sigaction host_action; /* what the signal had before us */
static int handler_installed;

static int handler_is_ours(void)
{
    struct sigaction cur;
    return sigaction(opt_dump_signal, NULL, &cur) == 0 &&
           (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == dump_on_signal;
}

/* Taken only from its default action (agent/host/signals.c keeps it from
 * the agent's other borrowers and gives it back as found). */
static void install_signal(void)
{
    if (!opt_dump_signal || dump_wake_pipe[1] < 0)
        return;
    int sig = signals_take_default(opt_dump_signal, dump_on_signal,
                                   &host_action);
    if (sig > 0)
        handler_installed = 1;
    else if (sig == -EBUSY)
        log_info("PPROF_DUMP_SIGNAL: the program already handles or "
                 "ignores signal %d; it is left to the program and no "
                 "dumps are written on it",
                 opt_dump_signal);
    else
        log_info("PPROF_DUMP_SIGNAL: signal %d is in use by the agent's "
                 "profiles; no dumps are written on it",
                 opt_dump_signal);
}

/* ---- writing files --------------------------------------------------------- */

static void two_digits(char *to, int v)
{
    to[0] = (char)('0' + v / 10 % 10);
    to[1] = (char)('0' + v % 10);
}

/* "<dir>/<program>-<pid>-<YYYYmmddTHHMMSS.mmmZ>" into out. */
static void file_stem(char *out, size_t size)
{
    char program[64];
    rundir_program(program, sizeof program);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    clock_gmtime_r(&ts.tv_sec, &tm);
    /* The agent's formatter has no field widths: the digits are placed by
     * hand (strftime would read the time zone under its lock). */
    char when[32];
    two_digits(when, (tm.tm_year + 1900) / 100);
    two_digits(when + 2, (tm.tm_year + 1900) % 100);
    two_digits(when + 4, tm.tm_mon + 1);
    two_digits(when + 6, tm.tm_mday);
    when[8] = 'T';
    two_digits(when + 9, tm.tm_hour);
    two_digits(when + 11, tm.tm_min);
    two_digits(when + 13, tm.tm_sec);
    when[15] = '\0';
    int ms = (int)(ts.tv_nsec / 1000000);
    log_snprintf(out, size, "%s/%s-%d-%s.%c%c%cZ", opt_dump_dir, program,
                 (int)getpid(), when, '0' + ms / 100, '0' + ms / 10 % 10,
                 '0' + ms % 10);
}

/* Writes data to path atomically: a temporary file in the same folder,
 * fsync'ed, renamed over path. Returns 0 or -errno. */
static int write_atomic(const char *path, const struct pbuf *data)
{
    char tmp[1400];
    log_snprintf(tmp, sizeof tmp, "%s.tmp", path);
    /* O_EXCL and O_NOFOLLOW: in a folder others can write to, a link
     * planted under our temporary name must not make us write elsewhere. */
    int fd = fds_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0644);
    if (fd < 0)
        return -errno;
    size_t off = 0;
    int err = 0;
    while (off < data->len) {
        ssize_t w = real_write(fd, data->data + off, data->len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            err = -errno;
            break;
        }
        off += (size_t)w;
    }
    if (!err && real_fsync(fd) != 0)
        err = -errno;
    if (fds_close(fd) != 0 && !err)
        err = -errno;
    if (!err && rename(tmp, path) != 0)
        err = -errno;
    if (err)
        unlink(tmp);
    return err;
}

/* Writes data, which its encoder returned err for, as stem + suffix when
 * err is 0 and data whole, then frees data; 1 when written, else one log
 * line. The one writer of every dump file:
 * save(stem, "cpu", &gz, encode_cpu(&gz)). */
static int save_as(const char *stem, const char *suffix, struct pbuf *data,
                   int err)
{
    char path[1300];
    log_snprintf(path, sizeof path, "%s%s", stem, suffix);
    if (err == 0)
        err = data->oom ? -ENOMEM : write_atomic(path, data);
    size_t len = data->len;
    pbuf_free(data);
    if (err) {
        log_info("cannot write %s: %s", path, log_errtext(-err));
        return 0;
    }
    log_debug("wrote %s (%zu bytes)", path, len);
    __atomic_fetch_add(&dump_files_written, 1, __ATOMIC_RELAXED);
    return 1;
}

/* A profile, as stem.kind.pb.gz. */
static int save(const char *stem, const char *kind, struct pbuf *gz, int err)
{
    char suffix[64];
    log_snprintf(suffix, sizeof suffix, ".%s.pb.gz", kind);
    return save_as(stem, suffix, gz, err);
}

/* A text (not a profile), as stem.name. */
static int save_plain(const char *stem, const char *name, struct pbuf *text,
                      int err)
{
    char suffix[64];
    log_snprintf(suffix, sizeof suffix, ".%s", name);
    return save_as(stem, suffix, text, err);
}

/* What the flight recorder keeps, as stem.trace; 1 when written. */
static int save_flight(const char *stem)
{
    if (!trace_flight_on() || trace_flight_take(0) != 0)
        return 0;
    struct pbuf t = {0};
    int written = save_as(stem, ".trace", &t, trace_write(NULL, 0, &t));
    trace_flight_give();
    return written;
}

/* ---- profiles -------------------------------------------------------------- */

static int encode_cpu(struct pbuf *out)
{
    if (!cpu_agg)
        return -ENOENT;
    struct write_options o = {.time_nanos = cpu_start_ns,
                              .duration_nanos = agent_now_ns() - cpu_start_ns};
    return cpu_write(cpu_agg, 1, &o, out);
}

/* The heap profile as /debug/pprof/heap serves it, without the age split
 * (encoder/heap.c writes both). */
static int encode_heap(struct pbuf *out)
{
    if (!heap_buckets)
        return -ENOENT;
    struct stack_snapshot snap;
    struct heap_record *recs;
    size_t n;
    if (heap_records_take(0, &recs, &n, &snap) != 0)
        return -ENOMEM;
    struct write_options o = {.time_nanos = agent_now_ns()};
    int err = heap_write("heap", recs, n, NULL, &o, out);
    real_free(recs);
    stack_snapshot_free(&snap);
    return err;
}

/* dump_lock held. */
static int dump_locked(const char *reason, int final)
{
    char stem[1200];
    file_stem(stem, sizeof stem);
    int written = 0;
    if (cpu_running) {
        if (final) {
            cpu_profile_stop(cpu_agg_add, cpu_agg);
            cpu_running = 0;
        } else {
            cpu_profile_drain(cpu_agg_add, cpu_agg);
        }
        struct pbuf gz = {0};
        written += save(stem, "cpu", &gz, encode_cpu(&gz));
        if (final)
            cpu_profile_release();
    }
    if (opt_heap_rate > 0) {
        struct pbuf gz = {0};
        written += save(stem, "heap", &gz, encode_heap(&gz));
    }
    written += save_flight(stem);
    log_debug("dump (%s): %d files as %s.*", reason, written, stem);
    return written;
}

int dump_now(const char *reason)
{
    if (!started)
        return 0;
    guard_enter();
    spin_lock(&dump_lock);
    int n = exited ? 0 : dump_locked(reason, 0);
    spin_unlock(&dump_lock);
    /* The files are written: the symbolizer gives back what it loaded, as
     * after an HTTP request. */
    symbols_release();
    guard_leave();
    return n;
}

/* The process the dumps were started in: a child of a raw clone (no fork
 * handlers reset the state) has the parent's but not its profile. */
static int dump_pid;

/* Runs in the host's exit path (exit() or return from main), after the
 * host's own atexit handlers registered after the agent loaded. Not in a
 * process that sandboxed itself (writing files could be what kills it),
 * nor in one the dumps were not started in. */
static void dump_at_exit(void)
{
    if (!started || agent_sandboxed || dump_pid != (int)real_syscall(SYS_getpid))
        return;
    guard_enter();
    spin_lock(&dump_lock);
    if (!exited) {
        exited = 1;
        dump_locked("exit", 1);
    }
    spin_unlock(&dump_lock);
    guard_leave();
}

/* ---- the watch's evidence (process/watch.c) --------------------------------- */

/* Runs locked(arg) under dump_lock, as the other dumps: one file name at
 * a time, none after the exit dump; then the symbolizer gives back what it
 * loaded. The files written. */
static int dump_under_lock(int (*locked)(const void *arg), const void *arg)
{
    if (!opt_dump_dir[0])
        return 0;
    spin_lock(&dump_lock);
    int n = exited ? 0 : locked(arg);
    spin_unlock(&dump_lock);
    symbols_release();
    return n;
}

static int deadlock_locked(const void *arg)
{
    const struct deadlock_report *r = arg;
    char stem[1200];
    file_stem(stem, sizeof stem);
    int written = 0;
    struct write_options o = {.debug = 1};
    struct pbuf text = {0};
    written += save_plain(stem, "deadlock.txt", &text,
                          deadlock_write(r, &o, &text));
    struct thread_dump d;
    if (threads_dump(&d) == 0) {
        written += save_plain(stem, "threads.txt", &text,
                              threads_dump_text(&d, &text));
        threads_dump_free(&d);
    }
    return written;
}

int dump_deadlock(const struct deadlock_report *r)
{
    return dump_under_lock(deadlock_locked, r);
}

/* The peak heap profile as /debug/pprof/peak serves it. */
static int encode_peak(struct pbuf *out)
{
    struct stack_snapshot snap;
    struct heap_record *recs;
    size_t n;
    int64_t when;
    char extra[256];
    if (!heap_buckets ||
        heap_records_take_peak(0, &recs, &n, &snap, &when, extra,
                               sizeof extra) != 0)
        return -ENOMEM;
    struct write_options o = {.time_nanos = when ? when : agent_now_ns()};
    int err = heap_write("peak", recs, n, extra, &o, out);
    real_free(recs);
    stack_snapshot_free(&snap);
    return err;
}

static int memory_locked(const void *summary)
{
    char stem[1200];
    file_stem(stem, sizeof stem);
    int written = 0;
    /* The heap first, the kill may come before the rest; unsymbolized,
     * which takes neither the time nor the memory of reading debug
     * information (pprof names the functions from the binaries). */
    stacks_addresses_only(1);
    if (opt_heap_rate > 0) {
        struct pbuf gz = {0};
        written += save(stem, "heap", &gz, encode_heap(&gz));
        written += save(stem, "peak", &gz, encode_peak(&gz));
    }
    stacks_addresses_only(0);
    struct pbuf text = {0};
    pbuf_puts(&text, summary);
    written += save_plain(stem, "memory.txt", &text, 0);
    struct memory_report rep;
    if (memory_read(&rep) == 0)
        written += save_plain(stem, "memory.json", &text,
                              memory_report_json(&rep, &text));
    return written;
}

int dump_memory(const char *summary)
{
    return dump_under_lock(memory_locked, summary);
}

/* ---- the dump thread --------------------------------------------------------- */

/* The dump thread; an attached agent's is joinable, ended by dump_stop
 * (the detacher). */
static struct agent_stoppable dumper;

SHELL_THREAD_MAIN(dump_thread, "pprof-dump")
static void *dump_thread_body(void *unused)
{
    (void)unused;
    int64_t next = opt_dump_interval > 0
                       ? agent_now_ns() + opt_dump_interval * 1000000000LL
                       : 0;
    int replaced_logged = 0;
    while (!stoppable_told(&dumper)) {
        /* The program cannot close or replace the pipe (agent/host/fds.c)
         * except by raw system calls: then it is dropped, not read. */
        if (dump_wake_pipe[0] >= 0 && fds_check(dump_wake_pipe[0]) != 0)
            dump_wake_pipe[0] = -1;
        struct pollfd p = {.fd = dump_wake_pipe[0], .events = POLLIN};
        int r = real_poll(&p, dump_wake_pipe[0] >= 0 ? 1 : 0, 1000);
        int signalled = 0;
        if (r > 0 && (p.revents & POLLIN)) {
            char buf[64];
            while (real_read(dump_wake_pipe[0], buf, sizeof buf) > 0)
                signalled = 1;
        }
        if (stoppable_told(&dumper))
            break; /* the detach writes the last dump */
        spin_lock(&dump_lock);
        if (exited) {
            spin_unlock(&dump_lock);
            break;
        }
        if (cpu_running)
            cpu_profile_drain(cpu_agg_add, cpu_agg);
        int64_t now = agent_now_ns();
        if (signalled) {
            dump_locked("signal", 0);
        } else if (next && now >= next) {
            dump_locked("interval", 0);
            next = now + opt_dump_interval * 1000000000LL;
        }
        spin_unlock(&dump_lock);
        if (handler_installed && !replaced_logged && !handler_is_ours()) {
            replaced_logged = 1;
            log_info("PPROF_DUMP_SIGNAL: the program installed its own "
                     "handler for signal %d; no more dumps on it",
                     opt_dump_signal);
        }
    }
    return NULL;
}

FORK_PATH void dump_fork_child(void)
{
    /* The dump thread and the CPU profile stay with the parent; the
     * handler is inherited and works again once the child's own dump
     * thread runs (children.c starts it). */
    FORK_SET(dump_lock.locked, 0);
    /* The pipe is shared with the parent: a signal to either would wake
     * either's dump thread. The child makes its own in dump_start(). */
    if (dump_wake_pipe[0] >= 0) {
        fds_close(dump_wake_pipe[0]);
        fds_close(dump_wake_pipe[1]);
    }
    FORK_SET(dump_wake_pipe[0], -1);
    FORK_SET(dump_wake_pipe[1], -1);
    FORK_SET(started, 0);
    FORK_SET(cpu_running, 0);
    FORK_SET(cpu_agg, NULL); /* the parent's samples: not this child's */
    FORK_SET(exited, 0);
    FORK_SET(dumper.joinable, 0); /* an attached parent's thread: not here */
    /* A child of an attached agent starts no dumps of its own (its fork
     * is not one of the doors, the start after it never comes): the
     * signal goes back to what the host had, not to a handler that
     * writes nowhere. */
    if (start_attached && handler_installed) {
        int taken = 0;
        signals_fork_child_reset(opt_dump_signal, &handler_installed,
                                 &host_action, &taken);
    }
}

void dump_start(void)
{
    if (!opt_dump_dir[0] || started)
        return;
    guard_enter();
    if (mkdir(opt_dump_dir, 0755) != 0 && errno != EEXIST)
        log_info("cannot create PPROF_DUMP_DIR %s: %s", opt_dump_dir,
                 log_errtext(errno));
    else if (access(opt_dump_dir, W_OK) != 0)
        log_info("PPROF_DUMP_DIR %s is not writable: %s", opt_dump_dir,
                 log_errtext(errno));

    cpu_agg = cpu_agg_new();
    /* A Go program's runtime installs its handlers on SIGPROF and every
     * real-time signal after the constructors, over a handler found there
     * (docs/cpu.md): a profile started now would get nothing, and its
     * expiries would reach Go's profiler. */
    int err = !cpu_agg            ? -ENOMEM
              : stack_go_program() ? -ENOTSUP
                                   : cpu_profile_start(opt_cpu_hz);
    if (err == 0) {
        cpu_running = 1;
        cpu_start_ns = agent_now_ns();
    } else {
        log_info("PPROF_DUMP_DIR: no CPU profile of the run (%s)",
                 err == -EBUSY    ? "a CPU profile is already running"
                 : err == -EAGAIN ? "no free signal"
                 : err == -ENOTSUP
                     ? "a Go program: its runtime takes the signals after "
                       "this start"
                                  : log_errtext(-err));
        cpu_agg_free(cpu_agg);
        cpu_agg = NULL;
    }

    if (dump_wake_pipe[0] < 0 &&
        fds_pipe(dump_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        dump_wake_pipe[0] = dump_wake_pipe[1] = -1;
    }
    install_signal();
    dump_pid = (int)real_syscall(SYS_getpid);
    started = 1;
    if (!exit_registered) {
        /* Inherited by forked children, which dump on their own exit. */
        exit_registered = 1;
        atexit(dump_at_exit);
    }

    err = -stoppable_spawn(&dumper, dump_thread, start_attached);
    if (err)
        log_info("PPROF_DUMP_DIR: cannot start the dump thread (%s); "
                 "profiles are written at exit only",
                 log_errtext(err));
    guard_leave();
}

/* Closes the signal's pipe once no handler can be writing to it
 * (dump_signal.c). */
static void close_wake_pipe(void)
{
    if (dump_wake_pipe[1] < 0)
        return;
    int w = dump_wake_pipe[1];
    __atomic_store_n(&dump_wake_pipe[1], -1, __ATOMIC_SEQ_CST);
    struct timespec nap = {0, 1000000};
    while (__atomic_load_n(&dump_signal_running, __ATOMIC_SEQ_CST) > 0)
        real_nanosleep(&nap, NULL);
    fds_close(w);
    if (dump_wake_pipe[0] >= 0)
        fds_close(dump_wake_pipe[0]);
    dump_wake_pipe[0] = -1;
}

void dump_stop(void)
{
    if (!started)
        return;
    guard_enter();
    stoppable_tell(&dumper);
    if (dumper.joinable && dump_wake_pipe[1] >= 0) {
        char c = 's';
        ssize_t r = real_write(dump_wake_pipe[1], &c, 1);
        (void)r;
    }
    stoppable_join(&dumper);
    /* The signal first: no dump asked for after the last one. */
    if (handler_installed)
        signals_give_back(opt_dump_signal, dump_on_signal, &host_action);
    handler_installed = 0;
    spin_lock(&dump_lock);
    if (!exited)
        dump_locked("detach", 1);
    started = 0;
    spin_unlock(&dump_lock);
    cpu_agg_free(cpu_agg);
    cpu_agg = NULL;
    close_wake_pipe();
    symbols_release();
    guard_leave();
}
