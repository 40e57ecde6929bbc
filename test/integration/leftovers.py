"""Runs a command and reports the processes it leaves behind.

    python3 leftovers.py [--wait SECS] [VAR=VALUE...] CMD [ARG...]

Becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so that every
process CMD makes and abandons (a daemon's double fork, a browser's crash
handler, sshd's session processes) is re-parented here, whatever it does to
its session, title or environment. Runs CMD with the VAR=VALUE settings
added to its environment (not to this one's: an agent in LD_PRELOAD loads
in CMD only), waits for it, then waits up to SECS (10) for what it left to
end (a daemon that the caller stops meanwhile),
reaping as it goes. Processes still alive then are listed on stderr
("left: PID CMDLINE") and killed, and the exit status is 125; otherwise it
is CMD's (128 + N when a signal N ended it). SIGTERM and SIGINT are passed
on to CMD.
"""
import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def children():
    """Pids of this process's live children (zombies reaped)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return []
        if pid == 0:
            break
    kids = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/children" % task) as f:
                kids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return kids


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "?"


def main():
    args = sys.argv[1:]
    wait = 10.0
    if len(args) > 1 and args[0] == "--wait":
        wait = float(args[1])
        args = args[2:]
    env = dict(os.environ)
    while args and "=" in args[0] and not args[0].startswith("/"):
        k, v = args.pop(0).split("=", 1)
        env[k] = v
    if not args:
        sys.exit("usage: leftovers.py [VAR=VALUE...] CMD [ARG...]")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("leftovers.py: cannot become a subreaper")
    pid = os.fork()
    if pid == 0:
        try:
            os.execvpe(args[0], args, env)
        finally:
            os._exit(127)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: os.kill(pid, s))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    code = os.waitstatus_to_exitcode(status)
    code = 128 - code if code < 0 else code
    end = time.monotonic() + wait
    while time.monotonic() < end:
        if not children():
            sys.exit(code)
        time.sleep(0.1)
    left = children()
    for p in left:
        sys.stderr.write("left: %d %s\n" % (p, cmdline(p)))
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.2)
    children()
    sys.exit(125 if left else code)


main()
