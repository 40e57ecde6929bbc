/*
 * The full threads dump (/debug/pprof/goroutine?debug=2): one block per
 * host thread in the shape of Go's unrecovered-panic traceback, which is
 * what Go serves there:
 *
 *     goroutine 4242 [sleeping, futex, thread "worker-3"]:
 *     labels: {"endpoint":"/api"}
 *     worker_loop(...)
 *     	/src/server.c:42 +0x1d
 *     main(...)
 *     	/src/server.c:99 +0x2f
 *
 * The id is the kernel's thread id; the bracket holds its /proc state, the
 * system call it is blocked in and the thread's name (pthread_setname_np),
 * quoted. The header matches Go's "^goroutine [0-9]+ \[[^]]+\]:$", which
 * parsers of Go dumps (panicparse) rely on: Go's bracket is a wait reason
 * followed by ", "-separated notes ("2 minutes", "locked to thread"), and
 * the name is one more note, with any ']' in it escaped. A thread whose stack could not be taken shows what is
 * known (the address of its system call) and a "[stack unavailable: why]"
 * line. Runs on the agent's server threads only; allocates freely.
 */
#include "encoder/encoder.h"

#include "agent/core/labels.h"
#include "agent/symbols/symbols.h"
#include "agent/threads/threads.h"

#include <errno.h>

static const char *why(int status)
{
    switch (status) {
    case THREAD_STACK_EINTR:
        return "blocked in a call that a signal would interrupt with EINTR";
    case THREAD_STACK_BLOCKED: return "the thread blocks the signal";
    case THREAD_STACK_STOPPED: return "stopped";
    case THREAD_STACK_NO_ANSWER: return "no answer in time";
    case THREAD_STACK_MOVED: return "moved while its stack was read";
    case THREAD_STACK_UNREADABLE: return "its stack could not be read";
    case THREAD_STACK_NO_PROC:
        return "its /proc syscall file cannot be read (a process that "
               "changed its user is not dumpable)";
    case THREAD_STACK_NOT_NOTED:
        return "not dumpable (it changed its user, or said "
               "PR_SET_DUMPABLE 0): its /proc syscall file cannot be "
               "read, and it waits in a call whose "
               "entry the agent does not note (or since before the agent "
               "began noting)";
    default: return "no signal available";
    }
}

/* One frame: "func(...)\n\tfile:line +0xOFF\n" per inlined function,
 * innermost first; the offset is Go's (from the function's entry to the
 * thread's pc, a return address for callers). */
static void put_frame(struct pbuf *out, uintptr_t pc, int leaf)
{
    const char *pseudo = symbols_pseudo_name(pc);
    if (pseudo) {
        pbuf_printf(out, "%s\n", pseudo);
        return;
    }
    uintptr_t shown = leaf ? pc : pc + 1;
    struct sym_frame f[8];
    int n = symbols_resolve(pc, f, 8);
    if (n <= 0) {
        int m = symbols_mapping_index(pc);
        pbuf_printf(out, "0x%lx(...)\n", (unsigned long)shown);
        if (m >= 0) {
            const struct sym_mapping *map = symbols_mapping_at((size_t)m);
            pbuf_printf(out, "\t%s +0x%lx\n", map->path,
                        (unsigned long)(shown - map->start + map->offset));
        } else {
            pbuf_puts(out, "\t?\n");
        }
        return;
    }
    for (int i = 0; i < n; i++) {
        pbuf_printf(out, "%s(...)\n\t", f[i].name ? f[i].name : "?");
        if (f[i].file)
            pbuf_printf(out, "%s:%d", f[i].file, f[i].line);
        else {
            int m = symbols_mapping_index(pc);
            pbuf_puts(out, m >= 0 ? symbols_mapping_at((size_t)m)->path : "?");
        }
        if (i == n - 1 && f[i].sym_start && shown >= f[i].sym_start)
            pbuf_printf(out, " +0x%lx",
                        (unsigned long)(shown - f[i].sym_start));
        pbuf_puts(out, "\n");
    }
}

/* The thread's name as a quoted note inside the header's bracket: quotes,
 * backslashes, control characters and ']' (which would end the bracket)
 * escaped. */
static void put_name(struct pbuf *out, const char *s)
{
    pbuf_puts(out, "thread \"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == ']')
            pbuf_printf(out, "\\x%02x", c);
        else if (c == '"' || c == '\\')
            pbuf_printf(out, "\\%c", c);
        else
            pbuf_append(out, s, 1);
    }
    pbuf_puts(out, "\"");
}

int threads_dump_text(const struct thread_dump *d, struct pbuf *out)
{
    symbols_lock();
    symbols_refresh();
    for (size_t i = 0; i < d->n; i++) {
        const struct thread_info *t = &d->threads[i];
        pbuf_printf(out, "goroutine %d [%s", t->tid,
                    threads_state_name(t->state));
        if (t->syscall >= 0) {
            const char *sc = threads_syscall_name(t->syscall);
            if (sc)
                pbuf_printf(out, ", %s", sc);
            else
                pbuf_printf(out, ", syscall %ld", t->syscall);
        }
        pbuf_puts(out, ", ");
        put_name(out, t->name);
        pbuf_puts(out, "]:\n");
        labels_put_text(out, "labels: ", t->labels);
        for (int f = 0; f < t->depth; f++)
            put_frame(out, t->pcs[f], f == 0);
        if (t->status != THREAD_STACK_OK)
            pbuf_printf(out, "[stack unavailable: %s]\n", why(t->status));
        pbuf_puts(out, "\n");
    }
    symbols_unlock();
    if (d->walked)
        pbuf_printf(out, "# pprofagent: %zu blocked threads walked without "
                         "a signal; frame pointers found %llu, walks ended "
                         "for want of one %llu\n",
                    d->walked, (unsigned long long)d->fp_found,
                    (unsigned long long)d->fp_lost);
    if (d->undumpable)
        pbuf_printf(out, "# pprofagent: the process is not dumpable (it "
                         "changed its user, or said PR_SET_DUMPABLE 0): "
                         "%zu sleeping threads walked "
                         "from where the agent's hooks saw them enter their "
                         "call, %zu without a stack\n",
                    d->noted, d->not_noted);
    if (d->agent_threads)
        pbuf_printf(out, "# pprofagent: %zu threads of the agent itself are "
                         "not listed\n",
                    d->agent_threads);
    return out->oom ? -ENOMEM : 0;
}
