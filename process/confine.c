/*
 * Before a chroot (cred_hooks.c calls confine_prepare before the real
 * call, after start_before_drop reserved the announcement and the port
 * file): what the agent would later open by a path the chroot hides is
 * opened now, in a process that serves or writes dumps. No thread is
 * started: a chroot forbids none (the server starts when the delay ends,
 * inside the chroot), and chroot(1) execs at once.
 *
 * - The libraries it loads on demand (libdw, libelf, zlib: symbols and
 *   compressed profiles): without them every profile failed.
 * - The symbolizer's view of the process: /proc/self/maps read and every
 *   mapped object opened (a libelf mapping each, kept), so that the
 *   profiles still have mappings and names. A library loaded after the
 *   chroot, and the separate debug files looked for later, are not found:
 *   their frames have addresses only, for go tool pprof to name from the
 *   files outside.
 * - The threads book (agent/host/proc_book.c): the threads and their
 *   masks, which the CPU profiler read from /proc.
 * What stays out of reach inside the chroot, said in docs/operations.md:
 * the unwind tables of the rare objects with .debug_frame only (built
 * later, from memory: their frames are walked by frame pointers), thread
 * names, /proc figures (stats, memory, cmdline), the run
 * directory's listing (/debug/pprof/processes shows nothing; the master
 * outside lists the worker), dumps to PPROF_DUMP_DIR, and the removal of
 * the announcement at exit (the next listing removes it). No directory
 * outside the chroot is held open: through one, code in the process could
 * walk out of its chroot.
 *
 * Contexts: the host's thread calling chroot, guard entered here. Costs
 * what the first profile would have cost (the objects' files opened),
 * once, in a process that chroots.
 */
#include "process/process.h"

#include "agent/config.h"
#include "agent/guard.h"
#include "agent/core/libs.h"
#include "agent/host/proc.h"
#include "agent/symbols/symbols.h"

void confine_prepare(void)
{
    int profiled = start_would_serve() ||
                   (opt_dump_dir[0] && !children_passive() && children_own());
    if (!profiled || __atomic_load_n(&proc_book_on, __ATOMIC_RELAXED))
        return;
    guard_enter();
    libs_load();
    symbols_lock();
    symbols_refresh();
    symbols_unlock();
    proc_book_open();
    guard_leave();
}
