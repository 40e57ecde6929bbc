#!/usr/bin/env python3
"""The CPU a process's threads used over a CPU profile's window, against the
profile: the truth for the *_cpu_truth tests.

  cpu_window.py watch PID OUT     every 10 ms until OUT.stop exists or PID
                                  ends: a snapshot of every thread's CPU
                                  clock (/proc/PID/task/TID/schedstat, ns:
                                  the clock utime+stime are scaled from)
  cpu_window.py compare OUT PROFILE.pb.gz MIN
                                  the host threads' CPU between the two
                                  snapshots around the profile's window
                                  (time_nanos, duration_nanos), per thread
                                  name and in all, against the profile's
                                  cpu/nanoseconds under each thread label;
                                  exit 1 when profile / measured < MIN
  cpu_window.py thread OUT PROFILE.pb.gz NAME
                                  "MEASURED_NS PROFILE_NS": the CPU of the
                                  threads named NAME over the window, and
                                  the profile's under their thread label

Each thread's clock at the window's ends is interpolated between the
snapshots around them. The agent's own threads (civetweb-*, pprof-*,
pprofagent-*) are left out:
the profile never samples them. A thread that ends inside the window is
counted up to its last snapshot (none ends in the tests that use this).
"""
import collections
import gzip
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import scrape_check  # noqa: E402


def watch(pid, out):
    with open(out, 'w') as f:
        while not os.path.exists(out + '.stop'):
            lines = ['T %d' % time.time_ns()]
            try:
                tids = os.listdir('/proc/%s/task' % pid)
            except OSError:
                break
            for tid in tids:
                d = '/proc/%s/task/%s/' % (pid, tid)
                try:
                    name = open(d + 'comm').read().strip().replace(' ', '_')
                    ns = open(d + 'schedstat').read().split()[0]
                except OSError:
                    continue
                lines.append('K %s %s %s' % (tid, name, ns))
            f.write('\n'.join(lines) + '\n')
            f.flush()
            time.sleep(0.01)


def profile(path):
    """(time_nanos, duration_nanos, {thread label: cpu ns}), read with the
    suite's one profile.proto decoder (test/scrape_check.py)."""
    p = scrape_check.decode(gzip.open(path).read())
    strings = p["strings"]
    per = collections.Counter()
    for s in p["sample"]:
        thread = '?'
        for lab in s["labels"]:
            if strings[lab.get(1, 0)] == 'thread':
                thread = strings[lab.get(2, 0)]
        per[thread.replace(' ', '_')[:15]] += s["val"][1]
    return p["time_nanos"], p["duration_nanos"], per


def agent_thread(name):
    return name.startswith(('civetweb', 'pprof'))


def clocks_at(snaps, t):
    """Every thread's clock at time t, linear between the snapshots
    around it (taken every 10 ms, later on a loaded machine): {tid: (name,
    ns)}, or None."""
    before = [s for s in snaps if s['t'] <= t]
    after = [s for s in snaps if s['t'] >= t]
    if not before or not after:
        return None
    a, b = before[-1], after[0]
    f = (t - a['t']) / (b['t'] - a['t']) if b['t'] > a['t'] else 0
    out = {}
    for tid, (name, ns) in b['k'].items():
        was = a['k'].get(tid, (name, ns))[1]
        out[tid] = (name, was + f * (ns - was))
    return out


def window(out, prof):
    """(window ns, snapshots, {thread name: measured ns}, {thread label:
    profile ns}) over the profile's window."""
    t0, dur, per = profile(prof)
    snaps, cur = [], None
    for line in open(out):
        w = line.split()
        if w[0] == 'T':
            cur = {'t': int(w[1]), 'k': {}}
            snaps.append(cur)
        elif cur is not None and len(w) == 4:
            cur['k'][w[1]] = (w[2], int(w[3]))
    measured = collections.Counter()
    start, end = clocks_at(snaps, t0), clocks_at(snaps, t0 + dur)
    if start is None or end is None:
        sys.exit('no snapshots around the window')
    for tid, (name, ns) in end.items():
        if not agent_thread(name):
            measured[name[:15]] += ns - start.get(tid, (name, 0))[1]
    return dur, len(snaps), measured, per


def compare(out, prof, minimum):
    dur, nsnaps, measured, per = window(out, prof)
    total, got = sum(measured.values()), sum(per.values())
    print('# window %.2f s, %d snapshots' % (dur / 1e9, nsnaps))
    for name, ns in measured.most_common():
        if ns > 2e6 or per.get(name):
            print('#   %-16s measured %8.1f ms  profile %8.1f ms' %
                  (name, ns / 1e6, per.get(name, 0) / 1e6))
    ratio = got / total if total else 0
    print('# threads measured %.0f ms, profile %.0f ms: %.1f%%' %
          (total / 1e6, got / 1e6, 100 * ratio))
    return 0 if ratio >= minimum else 1


def thread(out, prof, name):
    """Prints "MEASURED_NS PROFILE_NS" for the threads named name."""
    _, _, measured, per = window(out, prof)
    print('%d %d' % (measured.get(name, 0), per.get(name, 0)))
    return 0


if __name__ == '__main__':
    if sys.argv[1] == 'watch':
        watch(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == 'thread':
        sys.exit(thread(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3], float(sys.argv[4])))
